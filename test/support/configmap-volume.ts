import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * A Kubernetes ConfigMap or Secret volume, as the kubelet lays it out and updates it:
 *   <name> -> ..data/<name>,  ..data -> ..<timestamp>/
 * An update writes a new ..<timestamp>/ directory, points ..data_tmp at it and
 * renames ..data_tmp over ..data (one atomic rename), then removes the old one.
 * One file (a policy file: `new ConfigMapVolume(text, name)`) or several (a TLS
 * Secret: `new ConfigMapVolume({ 'tls.crt': ..., 'tls.key': ... })`), swapped together.
 */
export class ConfigMapVolume {
  readonly dir = mkdtempSync(join(tmpdir(), 'quota-configmap-'));
  private version = 0;
  private current: string | undefined;
  private readonly name: string;

  constructor(content: string | Record<string, string>, name = 'policies.yaml') {
    const files = typeof content === 'string' ? { [name]: content } : content;
    this.name = Object.keys(files)[0] ?? name;
    this.update(files);
    for (const file of Object.keys(files)) symlinkSync(`..data/${file}`, join(this.dir, file));
  }

  /** The (first) file's path, as a pod sees it. */
  get file(): string {
    return join(this.dir, this.name);
  }

  /** The path of one file of the volume, as a pod sees it. */
  path(name: string): string {
    return join(this.dir, name);
  }

  /** New contents: the one file's text, or every file's. */
  update(content: string | Record<string, string>): void {
    const files = typeof content === 'string' ? { [this.name]: content } : content;
    const next = `..2026_11_21_00_00_0${this.version++}`;
    mkdirSync(join(this.dir, next));
    for (const [file, text] of Object.entries(files)) writeFileSync(join(this.dir, next, file), text);
    symlinkSync(next, join(this.dir, '..data_tmp'));
    renameSync(join(this.dir, '..data_tmp'), join(this.dir, '..data'));
    if (this.current) rmSync(join(this.dir, this.current), { recursive: true });
    this.current = next;
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}
