import { randomUUID } from 'node:crypto';

export interface Order {
  id: string;
  sku: string;
  quantity: number;
  user: string;
  tenant: string;
  created_at: string;
}

/**
 * The demo business layer's storage: stock per SKU and the orders. It counts
 * every stock read and every write so that tests can prove a rejected request
 * never reached it (when the limiter rejects, no business logic runs).
 */
export class OrderStore {
  stockReads = 0;
  writes = 0;
  private readonly stock: Map<string, number>;
  private readonly orders = new Map<string, Order>();

  constructor(
    stock: Record<string, number>,
    /** Tests only: awaited before each write, to hold work in flight. */
    private readonly beforeWrite: () => Promise<void> = async () => {},
  ) {
    this.stock = new Map(Object.entries(stock));
  }

  async readStock(sku: string): Promise<number | undefined> {
    this.stockReads++;
    return this.stock.get(sku);
  }

  /** Takes `quantity` from stock and records the order; fails if stock ran out meanwhile. */
  async createOrder(input: Omit<Order, 'id' | 'created_at'>): Promise<Order | undefined> {
    await this.beforeWrite();
    const available = this.stock.get(input.sku) ?? 0;
    if (available < input.quantity) return undefined;
    this.writes++;
    this.stock.set(input.sku, available - input.quantity);
    const order = { id: randomUUID(), ...input, created_at: new Date().toISOString() };
    this.orders.set(order.id, order);
    return order;
  }

  async findOrder(id: string): Promise<Order | undefined> {
    return this.orders.get(id);
  }

  count(): number {
    return this.orders.size;
  }
}
