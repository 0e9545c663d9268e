import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';

/**
 * The Docker engine the tests use: the one DOCKER_HOST names (`make test` starts a private
 * dockerd, scripts/docker-engine.sh) or the docker CLI's default. With QUOTA_TEST_DOCKER=required
 * (set by `make test` once it started an engine) a missing engine fails the tests that need
 * one instead of skipping them.
 */
export function dockerEngine(): { ok: true } | { ok: false; reason: string } {
  const probe = spawnSync('docker', ['version', '--format', '{{.Server.Version}}'], { encoding: 'utf8' });
  if (probe.status === 0) return { ok: true };
  const reason = `no Docker engine (${(probe.error?.message ?? probe.stderr ?? '').trim().split('\n')[0]}); \`make test\` starts one`;
  if (process.env.QUOTA_TEST_DOCKER === 'required') throw new Error(`QUOTA_TEST_DOCKER=required but ${reason}`);
  return { ok: false, reason };
}

/**
 * Whether the image tests can run: an engine, and the images `make test` built
 * (QUOTA_TEST_IMAGE). Run alone without them they skip, saying why; under `make test`
 * (QUOTA_TEST_DOCKER=required) a missing one fails instead.
 */
export function imageTestsReady(): { ok: true } | { ok: false; reason: string } {
  const engine = dockerEngine();
  if (!engine.ok) return engine;
  if (!process.env.QUOTA_TEST_IMAGE) {
    const reason = 'QUOTA_TEST_IMAGE is not set: `make test` builds the test images (scripts/build-test-images.sh) and sets it';
    if (process.env.QUOTA_TEST_DOCKER === 'required') throw new Error(reason);
    return { ok: false, reason };
  }
  return { ok: true };
}

const run = promisify(execFile);

/** Runs the docker CLI; resolves with its stdout, trimmed; rejects with its stderr. */
export async function docker(args: readonly string[], options: { timeoutMs?: number } = {}): Promise<string> {
  try {
    const { stdout } = await run('docker', args, { encoding: 'utf8', timeout: options.timeoutMs ?? 60_000, maxBuffer: 16 * 1024 * 1024 });
    return stdout.trim();
  } catch (error) {
    const { stderr, stdout } = error as { stderr?: string; stdout?: string };
    throw new Error(`docker ${args.join(' ')} failed: ${(stderr || stdout || String(error)).trim()}`);
  }
}

/** A container's log, stdout and stderr together. */
export async function dockerLogs(container: string): Promise<string> {
  const { stdout, stderr } = await run('docker', ['logs', container], { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024 });
  return `${stdout}${stderr}`;
}

/** The 127.0.0.1 port Docker published for a container's port; refuses any other address. */
export async function publishedPort(container: string, containerPort: number): Promise<number> {
  const mapping = await docker(['port', container, `${containerPort}/tcp`]);
  const match = /^127\.0\.0\.1:(\d+)$/m.exec(mapping);
  if (match === null) throw new Error(`port ${containerPort} of ${container} is not published on 127.0.0.1 only: ${mapping}`);
  if (mapping.split('\n').length !== 1) throw new Error(`port ${containerPort} of ${container} is published on more than 127.0.0.1: ${mapping}`);
  return Number(match[1]);
}

/** The images `make test` built (scripts/build-test-images.sh); errors name the variable when unset. */
export function testImage(variable: 'QUOTA_TEST_IMAGE' | 'QUOTA_TEST_REDIS_IMAGE'): string {
  const image = process.env[variable];
  if (image === undefined || image === '') {
    throw new Error(`${variable} is not set: \`make test\` builds the test images (scripts/build-test-images.sh) and sets it`);
  }
  return image;
}
