// The fault proxy's own process (fault-proxy-process.ts): options as argv[2], commands over IPC.
import { startFaultProxy, type FaultProxyOptions } from './fault-proxy.js';
import type { ProxyCommand, ProxyReply } from './fault-proxy-process.js';

const send = (reply: ProxyReply) => process.send?.(reply);
const options = JSON.parse(process.argv[2] ?? '{}') as FaultProxyOptions;
try {
  const proxy = await startFaultProxy(options);
  process.on('message', (command: ProxyCommand) => {
    if (command.op === 'faults') proxy.setFaults(command.faults);
    else if (command.op === 'stall') proxy.stall();
    else if (command.op === 'resume') proxy.resume();
    send({ id: command.id, ...(command.op === 'stats' ? { stats: { lost: { ...proxy.lost }, maxLateMs: proxy.maxLateMs } } : {}) });
  });
  process.on('SIGTERM', () => void proxy.close().then(() => process.exit(0)));
  // The parent going away ends this process too.
  process.on('disconnect', () => process.exit(0));
  send({ ready: proxy.port });
} catch (error) {
  send({ error: String(error) });
  process.exit(1);
}
