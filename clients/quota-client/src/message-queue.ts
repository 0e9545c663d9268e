/**
 * The outgoing side of a client stream: an async iterable the caller pushes
 * into (nice-grpc reads requests from an async iterable, and has no queue of
 * its own). Messages pushed in one turn are handed over together.
 */
export class MessageQueue<T> implements AsyncIterable<T> {
  private items: T[] = [];
  private done = false;
  private wake: (() => void) | undefined;

  push(item: T): void {
    this.items.push(item);
    this.notify();
  }

  end(): void {
    this.done = true;
    this.notify();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    for (;;) {
      if (this.items.length > 0) {
        const items = this.items;
        this.items = [];
        yield* items;
        continue;
      }
      if (this.done) return;
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}
