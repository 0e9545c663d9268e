import { spawnSync } from 'node:child_process';
import { randomInt } from 'node:crypto';

/**
 * A network namespace joined to this (the root) namespace by a veth pair, with
 * a private /30 on the link: a second host on this machine that a test can cut
 * off and reconnect. Everything is made with iproute2 (`ip netns`, `ip link`),
 * which needs root.
 *
 * A partition takes the namespace's end of the link down. Packets to it then
 * vanish (the root end has no carrier) and TCP waits and retransmits, as it
 * does on a real network that splits; no RST or "unreachable" comes back.
 * The root end stays up on purpose: its connected route keeps this /30 on the
 * link (marked linkdown), where taking it down would hand the addresses to the
 * default route and send test traffic off the machine. A blackhole route with
 * a high metric stays under it as a second guard until the pair is gone.
 */
export interface NetworkNamespace {
  /** The namespace's name (`ip netns list`). */
  readonly name: string;
  /** The address inside the namespace (its end of the link). */
  readonly address: string;
  /** The root namespace's end of the link. */
  readonly hostAddress: string;
  /** The link's /30, e.g. 10.203.7.8/30. */
  readonly prefix: string;
  /** argv that runs `argv` inside the namespace: spawn(prefix[0], [...prefix.slice(1), ...]) keeps the pid (ip execs). */
  command(argv: readonly string[]): [string, string[]];
  /** Cuts the link: packets in both directions vanish. */
  partition(): void;
  /** Restores the link. */
  heal(): void;
  readonly partitioned: boolean;
  /** Kills what still runs inside, removes the namespace, the pair and the guard route. Idempotent. */
  destroy(): void;
}

export type NetnsSupport = { readonly ok: true } | { readonly ok: false; readonly reason: string };

const PREFIX = 'quota-fault-';
/** Guard routes have metric GUARD_METRIC_BASE + the owner's pid (pids stay below 2^22). */
const GUARD_METRIC_BASE = 100_000_000;

let support: NetnsSupport | undefined;
let counter = 0;
const live = new Set<NetworkNamespace>();

function ip(args: readonly string[]): { ok: boolean; out: string; err: string } {
  const result = spawnSync('ip', args, { encoding: 'utf8', timeout: 10_000 });
  if (result.error) return { ok: false, out: '', err: result.error.message };
  return { ok: result.status === 0, out: result.stdout, err: result.stderr.trim() };
}

function must(args: readonly string[]): string {
  const result = ip(args);
  if (!result.ok) throw new Error(`ip ${args.join(' ')}: ${result.err}`);
  return result.out;
}

/**
 * Whether this machine lets the tests make namespaces and veth pairs; when not,
 * why, in words a skipped test can carry. Checked once by trying.
 */
export function netnsSupport(): NetnsSupport {
  if (support !== undefined) return support;
  support = probe();
  return support;
}

function probe(): NetnsSupport {
  if (process.platform !== 'linux') return { ok: false, reason: `network namespaces need Linux (this is ${process.platform})` };
  const version = ip(['-V']);
  if (!version.ok) return { ok: false, reason: `iproute2's ip command is missing (${version.err}): apt-get install iproute2` };
  if (process.getuid?.() !== 0) return { ok: false, reason: `ip netns needs root (running as uid ${process.getuid?.()})` };
  try {
    createNetworkNamespace().destroy();
    return { ok: true };
  } catch (error) {
    return { ok: false, reason: `ip netns is not permitted here: ${(error as Error).message.split('\n')[0]}` };
  }
}

/** A new namespace and link, with names no other test process uses. */
export function createNetworkNamespace(): NetworkNamespace {
  sweepLeftovers();
  const n = counter++;
  const name = `${PREFIX}${process.pid}-${n}`;
  // Interface names have 15 characters at most.
  const hostEnd = `qf${process.pid.toString(36)}h${n.toString(36)}`;
  const innerEnd = `qf${process.pid.toString(36)}n${n.toString(36)}`;
  const { base, first } = freeSubnet();
  const address = `${base}.${first + 1}`;
  const hostAddress = `${base}.${first + 2}`;
  const prefix = `${base}.${first}/30`;
  // The guard's metric carries our pid: the sweep can tell a live owner's guard from a leftover.
  const guardMetric = String(GUARD_METRIC_BASE + process.pid);
  let partitioned = false;
  let destroyed = false;

  const destroy = () => {
    if (destroyed) return;
    destroyed = true;
    live.delete(namespace);
    // Whatever a test started in there and did not stop: ours, by pid.
    for (const pid of ip(['netns', 'pids', name]).out.split('\n').filter(Boolean)) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
    ip(['netns', 'del', name]);
    // Gone with the namespace once its last process is; at once if it still is not.
    ip(['link', 'del', hostEnd]);
    ip(['route', 'del', 'blackhole', prefix, 'metric', guardMetric]);
  };

  const namespace: NetworkNamespace = {
    name,
    address,
    hostAddress,
    prefix,
    command: (argv) => ['ip', ['netns', 'exec', name, ...argv]],
    partition() {
      must(['-n', name, 'link', 'set', innerEnd, 'down']);
      partitioned = true;
    },
    heal() {
      must(['-n', name, 'link', 'set', innerEnd, 'up']);
      partitioned = false;
    },
    get partitioned() {
      return partitioned;
    },
    destroy,
  };

  live.add(namespace);
  try {
    // The guard first: from now on these addresses can never leave the machine.
    must(['route', 'add', 'blackhole', prefix, 'metric', guardMetric]);
    must(['netns', 'add', name]);
    must(['link', 'add', hostEnd, 'type', 'veth', 'peer', 'name', innerEnd]);
    must(['link', 'set', innerEnd, 'netns', name]);
    must(['addr', 'add', `${hostAddress}/30`, 'dev', hostEnd]);
    must(['-n', name, 'addr', 'add', `${address}/30`, 'dev', innerEnd]);
    must(['link', 'set', hostEnd, 'up']);
    must(['-n', name, 'link', 'set', innerEnd, 'up']);
    must(['-n', name, 'link', 'set', 'lo', 'up']);
  } catch (error) {
    destroy();
    throw error;
  }
  return namespace;
}

/** A random /30 in 10.200.0.0/13 that no address or route here mentions yet: its first three octets and its first address. */
function freeSubnet(): { base: string; first: number } {
  const used = must(['-4', '-o', 'addr', 'show']) + must(['-4', 'route', 'show', 'table', 'all']);
  for (let attempt = 0; attempt < 100; attempt++) {
    const base = `10.${200 + randomInt(8)}.${randomInt(256)}`;
    const first = randomInt(64) * 4;
    const mentioned = new RegExp(`\\b${base.replaceAll('.', '\\.')}\\.(${first}|${first + 1}|${first + 2}|${first + 3})\\b`);
    if (!mentioned.test(used)) return { base, first };
  }
  throw new Error('no free /30 in 10.200.0.0/13');
}

/**
 * Namespaces (and their guard routes) left by a test process that was killed
 * before it could clean up: ours by name, theirs to remove once that pid is gone.
 */
function sweepLeftovers(): void {
  for (const line of ip(['netns', 'list']).out.split('\n')) {
    const match = new RegExp(`^${PREFIX}(\\d+)-\\d+`).exec(line);
    if (match === null || alive(Number(match[1]))) continue;
    ip(['netns', 'del', match[0]]);
  }
  for (const line of ip(['-4', 'route', 'show', 'type', 'blackhole']).out.split('\n')) {
    const match = /^blackhole (10\.\d+\.\d+\.\d+\/30) metric (\d+)/.exec(line.trim());
    if (match === null) continue;
    const owner = Number(match[2]) - GUARD_METRIC_BASE;
    if (owner > 0 && owner < 2 ** 22 && !alive(owner)) ip(['route', 'del', 'blackhole', match[1]!, 'metric', match[2]!]);
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

// Whatever ends the test process, no namespace of ours outlives it.
process.once('exit', () => {
  for (const namespace of [...live]) namespace.destroy();
});
