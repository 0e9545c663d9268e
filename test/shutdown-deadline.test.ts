import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { SHUTDOWN_MARGIN_MS } from '../src/shutdown-deadline.js';
import { startServiceProcess, type ServiceProcess } from './support/service-process.js';

/**
 * A shutdown ends in time whatever is left hanging: a log reader that closed the
 * service's stdout (a log shipper restarting, `| head`), or a connection the service
 * would wait for. Real service processes on the embedded store.
 */
const GRACE_MS = 1_000;
// What the process may take past its own deadline: starting to exit, and this test process noticing.
const SLACK_MS = 2_000;

let service: ServiceProcess | undefined;
let socket: Socket | undefined;
afterEach(() => {
  socket?.destroy();
  socket = undefined;
  // A process that outlived its deadline (the failure this file looks for) goes now.
  service?.signal('SIGKILL');
  service = undefined;
});

/** The exit code, or 'still running' once the deadline plus slack has passed. */
async function exitWithinDeadline(process: ServiceProcess): Promise<number | null | 'still running'> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'still running'>((resolve) => {
    timer = setTimeout(() => resolve('still running'), GRACE_MS + SHUTDOWN_MARGIN_MS + SLACK_MS);
  });
  try {
    return await Promise.race([process.exit, late]);
  } finally {
    clearTimeout(timer);
  }
}

describe('shutdown of the service process ends in time', () => {
  it.each(['SIGTERM', 'SIGINT'] as const)(
    '%s with stdout closed by its reader: the process stops and exits 0, noting the lost log on stderr',
    async (signal) => {
      service = startServiceProcess({ QUOTA_SHUTDOWN_GRACE_MS: String(GRACE_MS) });
      await service.logged(/"msg":"store ready: health SERVING"/);
      service.closeStdout();
      service.signal(signal);
      expect(await exitWithinDeadline(service)).toBe(0);
      expect(service.output().stderr).toMatch(/quota-service: stdout failed \(EPIPE\): log lines are dropped from now on/);
    },
  );

  it('a metrics scrape that never finishes its request: the process exits 1 at grace + margin, saying why on stderr', async () => {
    service = startServiceProcess({ QUOTA_SHUTDOWN_GRACE_MS: String(GRACE_MS), QUOTA_METRICS_ADDR: '127.0.0.1:0' });
    const line = await service.logged(/"msg":"metrics at GET \/metrics"/);
    const metricsPort = Number(/"port":(\d+)/.exec(line)![1]);
    await service.logged(/"msg":"store ready: health SERVING"/);
    // One write: a whole request, then the start of a second one whose headers never end. The
    // first answer shows the server has read both, so the connection is busy, not idle, when
    // the signal arrives, and closing the metrics server waits for it.
    const connected = connect(metricsPort, '127.0.0.1');
    socket = connected;
    const answered = new Promise<void>((resolve) => connected.once('data', () => resolve()));
    connected.write('GET /metrics HTTP/1.1\r\nHost: metrics\r\n\r\nGET /metrics HTTP/1.1\r\nHost: metrics\r\n');
    await answered;
    const signalledAt = Date.now();
    service.signal('SIGTERM');
    expect(await exitWithinDeadline(service)).toBe(1);
    expect(Date.now() - signalledAt).toBeGreaterThanOrEqual(GRACE_MS + SHUTDOWN_MARGIN_MS - 50);
    expect(service.output().stderr).toMatch(
      new RegExp(
        `quota-service: shutdown not finished ${GRACE_MS + SHUTDOWN_MARGIN_MS} ms after the signal \\(QUOTA_SHUTDOWN_GRACE_MS ${GRACE_MS} \\+ ${SHUTDOWN_MARGIN_MS}\\): exiting with code 1`,
      ),
    );
  });
});
