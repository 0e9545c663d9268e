/**
 * The pretend system behind the reference MCP server: tickets and customer
 * records in memory. It stands for whatever a real server fronts (an HTTP API, a
 * database); the point of the reference server is the guard around it.
 */
export interface Ticket {
  id: string;
  title: string;
  status: string;
  customerId?: string;
}

export interface Customer {
  id: string;
  name: string;
  plan: string;
  openTickets: number;
}

export class HelpDesk {
  private readonly tickets = new Map<string, Ticket>();
  private readonly customers = new Map<string, Customer>([
    ['c-100', { id: 'c-100', name: 'Acme Corp', plan: 'enterprise', openTickets: 0 }],
    ['c-200', { id: 'c-200', name: 'Globex', plan: 'team', openTickets: 0 }],
  ]);
  private nextId = 1;

  createTicket(title: string, customerId?: string): Ticket {
    const ticket: Ticket = { id: `T-${this.nextId++}`, title, status: 'open', ...(customerId === undefined ? {} : { customerId }) };
    this.tickets.set(ticket.id, ticket);
    return ticket;
  }

  /** Sets the status of each known ticket; returns the ids that were not found. */
  updateStatus(ids: readonly string[], status: string): { updated: string[]; missing: string[] } {
    const updated: string[] = [];
    const missing: string[] = [];
    for (const id of ids) {
      const ticket = this.tickets.get(id);
      if (ticket === undefined) missing.push(id);
      else {
        ticket.status = status;
        updated.push(id);
      }
    }
    return { updated, missing };
  }

  customer(id: string): Customer | undefined {
    return this.customers.get(id);
  }

  customerIds(): string[] {
    return [...this.customers.keys()];
  }

  deleteCustomer(id: string): boolean {
    return this.customers.delete(id);
  }
}
