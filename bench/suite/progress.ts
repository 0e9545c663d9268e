/**
 * The one status line of a running suite on stderr: rewritten in place on a
 * terminal, one plain line per change when stderr is a pipe or a file (CI logs).
 */
export class Progress {
  private last = '';
  private open = false;

  constructor(private readonly stream: NodeJS.WriteStream = process.stderr) {}

  /** Shows `text` as the current status. */
  update(text: string): void {
    if (text === this.last) return;
    this.last = text;
    if (this.stream.isTTY) {
      // A pseudo-terminal with no size set reports 0 columns.
      const width = Math.max(20, (this.stream.columns || 100) - 1);
      this.stream.write(`\r\x1b[2K${text.length > width ? `${text.slice(0, width - 1)}…` : text}`);
      this.open = true;
    } else {
      this.stream.write(`${text}\n`);
    }
  }

  /** Leaves `text` on a line of its own (a step's end, a failure), then goes on below it. */
  log(text: string): void {
    if (this.open) this.stream.write('\r\x1b[2K');
    this.open = false;
    this.last = '';
    this.stream.write(`${text}\n`);
  }
}
