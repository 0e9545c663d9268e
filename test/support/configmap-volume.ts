import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A Kubernetes ConfigMap or Secret volume, as the kubelet lays it out and updates it:
 *   <name> -> ..data/<name>,  ..data -> ..<timestamp>/
 * An update writes a new ..<timestamp>/ directory, points ..data_tmp at it and
 * renames ..data_tmp over ..data (one atomic rename), then removes the old one.
 */
export class ConfigMapVolume {
  readonly dir = mkdtempSync(join(tmpdir(), 'quota-configmap-'));
  private version = 0;
  private current: string | undefined;

  constructor(
    text: string,
    private readonly name = 'policies.yaml',
  ) {
    this.update(text);
    symlinkSync(`..data/${name}`, join(this.dir, name));
  }

  get file(): string {
    return join(this.dir, this.name);
  }

  update(text: string): void {
    const next = `..2026_11_21_00_00_0${this.version++}`;
    mkdirSync(join(this.dir, next));
    writeFileSync(join(this.dir, next, this.name), text);
    symlinkSync(next, join(this.dir, '..data_tmp'));
    renameSync(join(this.dir, '..data_tmp'), join(this.dir, '..data'));
    if (this.current) rmSync(join(this.dir, this.current), { recursive: true });
    this.current = next;
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
