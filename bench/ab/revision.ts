// A git revision of this repository built apart for bench/ab/main.ts: its files in
// .tmp/ab/<commit>, the repository's installed packages beside them, except that
// @quota-service/* are that revision's own packages, then its generated code, its
// packages, and the service and bench servers compiled as the benches run them.
// A revision that locks other package versions runs with the checkout's all the
// same (building it says so).
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The working tree as it is now: changes not committed and new files git does not ignore included. */
export const WORKTREE = 'worktree';
/** Written last: a directory without it is an unfinished build and is built again. */
const BUILT_STAMP = '.ab-built';

export interface Revision {
  /** As asked (`HEAD~1`, a branch, `worktree`). */
  readonly name: string;
  /** The commit built (for `worktree`, git's snapshot of the working tree). */
  readonly commit: string;
  readonly dir: string;
}

/**
 * The commit `name` stands for. `worktree`: the working tree as it is (changed
 * files, and new ones git does not ignore) as a commit on top of HEAD, made on
 * an index of its own: the checkout's index and branches stay as they are.
 */
export async function resolveCommit(repoRoot: string, name: string): Promise<string> {
  const git = (args: string[], env?: NodeJS.ProcessEnv) =>
    run('git', args, { cwd: repoRoot, env: { ...process.env, ...env } }).then(({ stdout }) => stdout.trim());
  if (name !== WORKTREE) return git(['rev-parse', '--verify', `${name}^{commit}`]);
  const scratch = await mkdtemp(join(tmpdir(), 'ab-index-'));
  try {
    const index = { GIT_INDEX_FILE: join(scratch, 'index') };
    await git(['read-tree', 'HEAD'], index);
    await git(['add', '--all'], index);
    const tree = await git(['write-tree'], index);
    const head = await git(['rev-parse', 'HEAD']);
    // The same tree as HEAD: HEAD itself (one build for both).
    if (tree === (await git(['rev-parse', 'HEAD^{tree}']))) return head;
    // Fixed dates: the same working tree gives the same commit, so it is built once.
    return git(['commit-tree', tree, '-p', head, '-m', 'the working tree, for bench/ab'], { GIT_AUTHOR_DATE: '@0 +0000', GIT_COMMITTER_DATE: '@0 +0000' });
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/**
 * `node_modules` for a revision's directory: an entry per package the repository
 * installed, pointing at it, and under `@quota-service` the revision's own
 * packages (`packages`: name -> directory), so its service and bench servers
 * import them, not the checkout's.
 */
export async function overlayNodeModules(installed: string, target: string, packages: ReadonlyMap<string, string>): Promise<void> {
  await mkdir(join(target, '@quota-service'), { recursive: true });
  for (const entry of await readdir(installed, { withFileTypes: true })) {
    if (entry.name === '@quota-service') continue;
    await symlink(join(installed, entry.name), join(target, entry.name));
  }
  for (const [name, dir] of packages) await symlink(dir, join(target, name));
}

/** The revision's packages (clients/*), by the name in their package.json. */
async function workspacePackages(dir: string): Promise<Map<string, string>> {
  const packages = new Map<string, string>();
  for (const entry of await readdir(join(dir, 'clients'), { withFileTypes: true })) {
    const manifest = join(dir, 'clients', entry.name, 'package.json');
    if (!entry.isDirectory() || !existsSync(manifest)) continue;
    const { name } = JSON.parse(await readFile(manifest, 'utf8')) as { name: string };
    packages.set(name, join(dir, 'clients', entry.name));
  }
  return packages;
}

/**
 * The revision `name` built in `<repoRoot>/.tmp/ab/<commit>`, once: a second
 * run finds it built. `log` hears what is being done (a build takes under a minute).
 */
export async function buildRevision(repoRoot: string, name: string, log: (line: string) => void): Promise<Revision> {
  const commit = await resolveCommit(repoRoot, name);
  const revision = { name, commit, dir: join(repoRoot, '.tmp', 'ab', commit.slice(0, 12)) };
  if (!existsSync(join(revision.dir, BUILT_STAMP))) {
    log(`building ${name} (${commit.slice(0, 12)}) in ${revision.dir}`);
    await build(repoRoot, revision);
  }
  await warnOfOtherPackages(repoRoot, revision, log);
  return revision;
}

/** Unpacks the revision's files into its directory, links the packages beside them, and builds it there. */
async function build(repoRoot: string, { name, commit, dir }: Revision): Promise<void> {
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const archive = join(dir, '.ab-files.tar');
  await run('git', ['archive', `--output=${archive}`, commit], { cwd: repoRoot });
  await run('tar', ['-x', '-f', archive, '-C', dir]);
  await rm(archive);
  const packages = await workspacePackages(dir);
  await overlayNodeModules(join(repoRoot, 'node_modules'), join(dir, 'node_modules'), packages);
  // A package's own node_modules (npm installs there what it cannot hoist): the checkout's.
  for (const packageDir of packages.values()) {
    const own = join(repoRoot, relative(dir, packageDir), 'node_modules');
    if (existsSync(own)) await symlink(own, join(packageDir, 'node_modules'));
  }
  const node = (...args: string[]) => run(process.execPath, args, { cwd: dir, maxBuffer: 64 * 2 ** 20 });
  const tsc = join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc');
  try {
    for (const script of ['gen-proto.mjs', 'gen-envoy-proto.mjs', 'gen-lua.mjs']) await node(join('scripts', script));
    await node(tsc, '-b', 'tsconfig.build.json');
    await node(tsc, '-p', 'tsconfig.bench.json');
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    throw new Error(`building ${name} (${commit.slice(0, 12)}) failed:\n${stdout ?? ''}${stderr ?? String(error)}`);
  }
  await writeFile(join(dir, BUILT_STAMP), `${commit}\n`);
}

/**
 * A revision runs with the packages this checkout installed: one whose
 * package-lock.json differs would have installed others, so its figures may
 * differ from what it gives installed as it locks them. Says so when that is the case.
 */
export async function warnOfOtherPackages(repoRoot: string, revision: Revision, log: (line: string) => void): Promise<void> {
  const lock = (dir: string) => readFile(join(dir, 'package-lock.json'), 'utf8').catch(() => '');
  if ((await lock(revision.dir)) === (await lock(repoRoot))) return;
  log(`note: the package-lock.json of ${revision.name} differs from this checkout's; it runs with the packages this checkout installed`);
}
