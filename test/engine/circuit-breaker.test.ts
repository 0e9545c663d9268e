// The circuit breaker on its own (src/engine/circuit-breaker.ts): the calls are plain
// functions whose promises the test controls, the clock is the breaker's own
// (Date.now), so the half-open delay is waited out for real (a few ms).
import { describe, expect, it } from 'vitest';
import { CircuitBreaker, CircuitOpenError, type CircuitStateName } from '../../src/engine/circuit-breaker.js';

class Outage extends Error {}
class Bug extends Error {}

const HALF_OPEN_AFTER_MS = 30;

/**
 * execute(fn), or run(fn, onValue, onError) with handlers that pass the
 * outcome on unchanged: run must behave as execute(fn).then(onValue, onError)
 * in every state, so every test below runs both ways.
 */
type Way = 'execute' | 'run';

function setup(way: Way) {
  const events: string[] = [];
  const breaker = new CircuitBreaker({
    failures: 3,
    halfOpenAfterMs: HALF_OPEN_AFTER_MS,
    counts: (error) => error instanceof Outage,
    onBreak: (error) => events.push(`break:${(error as Error).message}`),
    onReset: () => events.push('reset'),
    onStateChange: (state: CircuitStateName) => events.push(`state:${state}`),
  });
  let calls = 0;
  const counted =
    <T>(fn: () => Promise<T>) =>
    () => {
      calls++;
      return fn();
    };
  const run = <T>(fn: () => Promise<T>): Promise<T> =>
    way === 'execute'
      ? breaker.execute(counted(fn))
      : breaker.run(
          counted(fn),
          (value) => value,
          (error: unknown) => {
            throw error;
          },
        );
  return { breaker, events, run, calls: () => calls };
}

const down =
  (why = 'down') =>
  () =>
    Promise.reject(new Outage(why));
const up = () => Promise.resolve('ok');
const settle = (promise: Promise<unknown>) =>
  promise.then(
    () => 'ok',
    (error: unknown) => (error as Error).constructor.name,
  );
const waitOut = () => new Promise((resolve) => setTimeout(resolve, HALF_OPEN_AFTER_MS + 10));

async function openIt(run: ReturnType<typeof setup>['run']) {
  for (let i = 0; i < 3; i++) await settle(run(down()));
}

describe.each<Way>(['execute', 'run'])('CircuitBreaker (src/engine/circuit-breaker.ts), %s', (way) => {
  it('passes answers and errors through; counted failures in a row open it, and only then', async () => {
    const { breaker, events, run, calls } = setup(way);
    expect(await run(up)).toBe('ok');
    await expect(run(down())).rejects.toBeInstanceOf(Outage);
    await expect(run(down())).rejects.toBeInstanceOf(Outage);
    // A call that goes through resets the count: two more failures do not open it.
    expect(await run(up)).toBe('ok');
    await settle(run(down()));
    await settle(run(down()));
    expect(breaker.state).toBe('closed');
    await expect(run(down('third'))).rejects.toBeInstanceOf(Outage);
    expect(breaker.state).toBe('open');
    expect(events).toEqual(['break:third', 'state:open']);
    expect(calls()).toBe(7);
  });

  it('one failure counts once, however many calls it failed (a batch, a shared deadline): it opens nothing on its own', async () => {
    const { breaker, run } = setup(way);
    const shared = new Outage('one store call');
    for (let i = 0; i < 10; i++) await settle(run(() => Promise.reject(shared)));
    expect(breaker.state).toBe('closed');
    await settle(run(down()));
    await settle(run(down()));
    expect(breaker.state).toBe('open');
  });

  it('errors that do not count propagate and neither open it nor reset the count', async () => {
    const { breaker, run } = setup(way);
    await settle(run(down()));
    await settle(run(down()));
    for (let i = 0; i < 5; i++) await expect(run(() => Promise.reject(new Bug('bug')))).rejects.toBeInstanceOf(Bug);
    expect(breaker.state).toBe('closed');
    await settle(run(down()));
    expect(breaker.state).toBe('open');
  });

  it('a call that throws instead of returning a promise is a failure like a rejection', async () => {
    const { breaker, run } = setup(way);
    for (let i = 0; i < 3; i++) {
      await expect(
        run(() => {
          throw new Outage('sync');
        }),
      ).rejects.toBeInstanceOf(Outage);
    }
    expect(breaker.state).toBe('open');
  });

  it('open: calls are refused with CircuitOpenError without being made, until the half-open delay', async () => {
    const { run, calls } = setup(way);
    await openIt(run);
    for (let i = 0; i < 4; i++) await expect(run(up)).rejects.toBeInstanceOf(CircuitOpenError);
    expect(calls()).toBe(3);
  });

  it('half-open: one probe; calls meanwhile wait for it; its success closes the circuit for them too', async () => {
    const { breaker, events, run, calls } = setup(way);
    await openIt(run);
    await waitOut();
    let answer!: (value: string) => void;
    const probe = run(() => new Promise<string>((resolve) => (answer = resolve)));
    expect(breaker.state).toBe('half_open');
    const waiting = [run(up), run(up)];
    expect(calls()).toBe(4);
    answer('probe ok');
    expect(await probe).toBe('probe ok');
    expect(await Promise.all(waiting)).toEqual(['ok', 'ok']);
    expect(breaker.state).toBe('closed');
    expect(calls()).toBe(6);
    expect(events).toEqual(['break:down', 'state:open', 'state:half_open', 'reset', 'state:closed']);
  });

  it('a failed probe opens it again for another delay; the calls that waited are refused', async () => {
    const { breaker, events, run, calls } = setup(way);
    await openIt(run);
    await waitOut();
    const probe = settle(run(down('still down')));
    const waiting = settle(run(up));
    expect(await probe).toBe('Outage');
    expect(await waiting).toBe('CircuitOpenError');
    expect(breaker.state).toBe('open');
    expect(calls()).toBe(4);
    expect(events).toEqual(['break:down', 'state:open', 'state:half_open', 'break:still down', 'state:open']);
    // A new delay from the failed probe, then a probe again.
    await expect(run(up)).rejects.toBeInstanceOf(CircuitOpenError);
    await waitOut();
    expect(await run(up)).toBe('ok');
    expect(breaker.state).toBe('closed');
  });

  it('a probe failing with an error that does not count closes the circuit and propagates', async () => {
    const { breaker, run } = setup(way);
    await openIt(run);
    await waitOut();
    await expect(run(() => Promise.reject(new Bug('bug')))).rejects.toBeInstanceOf(Bug);
    expect(breaker.state).toBe('closed');
  });

  it('a call started while closed that fails once the circuit is half-open opens it again', async () => {
    const { breaker, events, run } = setup(way);
    let failLate!: () => void;
    const late = settle(run(() => new Promise<string>((_, reject) => (failLate = () => reject(new Outage('late'))))));
    await openIt(run);
    await waitOut();
    let answer!: (value: string) => void;
    const probe = run(() => new Promise<string>((resolve) => (answer = resolve)));
    expect(breaker.state).toBe('half_open');
    failLate();
    expect(await late).toBe('Outage');
    expect(breaker.state).toBe('open');
    answer('probe ok');
    await probe;
    // The probe went through, but the circuit was no longer half-open: it stays open.
    expect(breaker.state).toBe('open');
    expect(events).toEqual(['break:down', 'state:open', 'state:half_open', 'break:late', 'state:open']);
  });
});

describe('CircuitBreaker.run', () => {
  it('hands the value to onValue and the error to onError, closed and open alike', async () => {
    const { breaker } = setup('run');
    const seen = (fn: () => Promise<string>) =>
      breaker.run(
        fn,
        (value) => `value:${value}`,
        (error: unknown) => `error:${(error as Error).constructor.name}`,
      );
    expect(await seen(up)).toBe('value:ok');
    for (let i = 0; i < 3; i++) expect(await seen(down())).toBe('error:Outage');
    expect(breaker.state).toBe('open');
    expect(await seen(up)).toBe('error:CircuitOpenError');
  });
});
