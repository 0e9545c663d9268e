// A callers file (QUOTA_AUTH_TOKENS) where a token sits where a name belongs:
// a caller's name, a field's name, a top-level key. Whatever the loader finds
// wrong with it, at startup or on a hot reload, its messages say where (the
// caller's position and line, a short SHA-256 of the name) and never print a
// name or a value of the file.
import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { ClientError, createChannel, createClient, Metadata, Status } from 'nice-grpc';
import { afterAll, describe, expect, it } from 'vitest';
import { QuotaServiceDefinition } from '@quota-service/contract';
import { parseCallers } from '../../src/config/callers.js';
import { ConfigMapVolume } from '../support/configmap-volume.js';
import { startServiceProcess, untilServing } from '../support/service-process.js';

// Secret-looking strings, all valid caller names but the one with "+/=" in it.
const SECRET_NAME = 'sk_live_9f8e7d6c5b4a392817060f5e4d3c';
const OTHER_SECRET_NAME = 'ghp_Q2xhdWRlU2VjcmV0VG9rZW4xMjM0NTY';
const BASE64_SECRET_NAME = 'xoxb-4417+aZ9qT0kLm/Pw3R8vB2==';
const SECRET_FIELD = 'glpat-AbCdEf0123456789xyzW';
const SECRET_TOP_KEY = 'AKIAIOSFODNN7EXAMPLEKEY9';
const SECRET_VALUE = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLc';
const SECRET_DIGITS_NAME = '88172635499812736451928374';
const SECRETS = [SECRET_NAME, OTHER_SECRET_NAME, BASE64_SECRET_NAME, SECRET_FIELD, SECRET_TOP_KEY, SECRET_VALUE, SECRET_DIGITS_NAME];

const TOKEN = 'a-real-token-0123456789abcdef';
const OTHER_TOKEN = 'another-token-fedcba9876543210';

/** What the messages print for a name: the first 8 hex digits of its SHA-256 (`printf %s NAME | sha256sum`). */
const sha = (name: string) => `sha256 ${createHash('sha256').update(name, 'utf8').digest('hex').slice(0, 8)}`;

const VALID = `callers:\n  order-api:\n    token: ${TOKEN}\n    policies: [orders]\n`;

/** [kind of error, file, the lines the loader reports after "invalid callers:" (or the whole message)] */
const cases: [string, string, string[]][] = [
  [
    'the same token twice',
    `callers:\n  order-api: { token: ${TOKEN}, policies: [orders] }\n  ${SECRET_NAME}: { token: ${TOKEN}, policies: [orders] }\n`,
    [`the 2nd caller (line 3, name ${sha(SECRET_NAME)}) has the same token as the 1st caller (line 2, name ${sha('order-api')})`],
  ],
  [
    'the same token twice, as token and as token_sha256, both names secret',
    `callers:\n  ${OTHER_SECRET_NAME}:\n    token: ${TOKEN}\n    policies: [orders]\n  ${SECRET_NAME}:\n    token_sha256: ${createHash('sha256').update(TOKEN).digest('hex')}\n    policies: ['*']\n`,
    [`the 2nd caller (line 5, name ${sha(SECRET_NAME)}) has the same token as the 1st caller (line 2, name ${sha(OTHER_SECRET_NAME)})`],
  ],
  [
    'a name that is not a name',
    `callers:\n  ${BASE64_SECRET_NAME}: { token: ${TOKEN}, policies: [orders] }\n`,
    [`the 1st caller (line 2, name ${sha(BASE64_SECRET_NAME)}): the name must be 1-64 letters, digits, "_", "." or "-"`],
  ],
  [
    'a name made of digits, placed after another caller',
    `callers:\n  order-api: { token: ${TOKEN}, policies: [orders] }\n  ${SECRET_DIGITS_NAME}: { policies: [orders] }\n`,
    [`the 2nd caller (line 3, name ${sha(SECRET_DIGITS_NAME)}): token: give exactly one of token, token_sha256`],
  ],
  [
    'no token (the token was written as the name)',
    `callers:\n  ${SECRET_NAME}:\n    policies: [orders]\n`,
    [`the 1st caller (line 2, name ${sha(SECRET_NAME)}): token: give exactly one of token, token_sha256`],
  ],
  [
    'both token and token_sha256',
    `callers:\n  ${SECRET_NAME}: { token: ${TOKEN}, token_sha256: ${'a'.repeat(64)}, policies: [orders] }\n`,
    [`the 1st caller (line 2, name ${sha(SECRET_NAME)}): token: give exactly one of token, token_sha256`],
  ],
  [
    'a token too short',
    `callers:\n  ${SECRET_NAME}: { token: short-${SECRET_VALUE.slice(0, 4)}, policies: [orders] }\n`,
    [`the 1st caller (line 2, name ${sha(SECRET_NAME)}): token: must be at least 16 characters`],
  ],
  [
    'a token_sha256 that is not a hash (the token itself)',
    `callers:\n  ${SECRET_NAME}: { token_sha256: ${SECRET_VALUE}, policies: [orders] }\n`,
    [`the 1st caller (line 2, name ${sha(SECRET_NAME)}): token_sha256: must be 64 hex digits (sha256sum of the token)`],
  ],
  [
    'a token that is not a string',
    `callers:\n  ${SECRET_NAME}: { token: [${SECRET_VALUE}], policies: [orders] }\n`,
    [`the 1st caller (line 2, name ${sha(SECRET_NAME)}): token: Invalid input: expected string, received array`],
  ],
  [
    'a caller that is a value, not a mapping',
    `callers:\n  ${SECRET_NAME}: ${SECRET_VALUE}\n  order-api: { token: ${TOKEN}, policies: [orders] }\n`,
    [`the 1st caller (line 2, name ${sha(SECRET_NAME)}): Invalid input: expected object, received string`],
  ],
  [
    'an unknown field whose name is a secret',
    `callers:\n  order-api:\n    token: ${TOKEN}\n    policies: [orders]\n    ${SECRET_FIELD}: ${SECRET_VALUE}\n`,
    [
      `the 1st caller (line 2, name ${sha('order-api')}): unknown field (${sha(SECRET_FIELD)}): a caller has token or token_sha256, policies and/or domains, and optionally roles`,
    ],
  ],
  [
    'an empty policy list',
    `callers:\n  ${SECRET_NAME}: { token: ${TOKEN}, policies: [] }\n`,
    [`the 1st caller (line 2, name ${sha(SECRET_NAME)}): policies: list the policies this caller may use, or ["*"] for all`],
  ],
  [
    'a policy list that is a string',
    `callers:\n  ${SECRET_NAME}: { token: ${TOKEN}, policies: ${SECRET_VALUE} }\n`,
    [`the 1st caller (line 2, name ${sha(SECRET_NAME)}): policies: Invalid input: expected array, received string`],
  ],
  [
    'an empty policy name and one that is a mapping',
    `callers:\n  ${SECRET_NAME}: { token: ${TOKEN}, policies: [orders, '', { ${SECRET_FIELD}: ${SECRET_VALUE} }] }\n`,
    [
      `the 1st caller (line 2, name ${sha(SECRET_NAME)}): policies.1: Too small: expected string to have >=1 characters`,
      `the 1st caller (line 2, name ${sha(SECRET_NAME)}): policies.2: Invalid input: expected string, received object`,
    ],
  ],
  [
    'no policies',
    `callers:\n  order-api: { token: ${TOKEN}, policies: [orders] }\n  b: { token: ${OTHER_TOKEN}, policies: [orders] }\n  ${SECRET_NAME}: { token: ${SECRET_VALUE} }\n`,
    [
      `the 3rd caller (line 4, name ${sha(SECRET_NAME)}): policies: list the policies this caller may use (or ["*"]), the rate limit domains it may ask about, or both`,
    ],
  ],
  [
    'several problems: each is reported',
    `callers:\n  ${SECRET_NAME}: { token: ${TOKEN}, policies: [orders] }\n  ${BASE64_SECRET_NAME}: { token: ${OTHER_TOKEN} }\n  ${OTHER_SECRET_NAME}: { token: ${TOKEN}, policies: [x] }\n`,
    [
      `the 2nd caller (line 3, name ${sha(BASE64_SECRET_NAME)}): the name must be 1-64 letters, digits, "_", "." or "-"`,
      `the 2nd caller (line 3, name ${sha(BASE64_SECRET_NAME)}): policies: list the policies this caller may use (or ["*"]), the rate limit domains it may ask about, or both`,
      `the 3rd caller (line 4, name ${sha(OTHER_SECRET_NAME)}) has the same token as the 1st caller (line 2, name ${sha(SECRET_NAME)})`,
    ],
  ],
  [
    'an unknown top-level key that is a secret',
    `callers:\n  order-api: { token: ${TOKEN}, policies: [orders] }\n${SECRET_TOP_KEY}: ${SECRET_VALUE}\n`,
    [`an unknown top-level key (line 3, ${sha(SECRET_TOP_KEY)}): the file holds "callers" only`],
  ],
  ['callers that are a list', `callers:\n  - ${SECRET_NAME}\n  - ${SECRET_VALUE}\n`, ['callers: must be a mapping of caller names to callers']],
  [
    'no callers key',
    `${SECRET_NAME}:\n  token: ${TOKEN}\n  policies: [orders]\n`,
    [`an unknown top-level key (line 1, ${sha(SECRET_NAME)}): the file holds "callers" only`, 'callers: missing'],
  ],
  ['a file that is not a mapping', `- ${SECRET_NAME}\n`, ['the file must be a mapping with the key "callers"']],
];

/** Errors the YAML parser reports, with the line only: checked on the real process below. */
const yamlCases: [string, string, string][] = [
  ['invalid YAML', `callers:\n  ${SECRET_NAME}: { token: "${SECRET_VALUE}\n`, 'invalid YAML (line 3)'],
  [
    'the same name twice',
    `callers:\n  ${SECRET_NAME}: { token: ${TOKEN}, policies: [a] }\n  ${SECRET_NAME}: { token: ${OTHER_TOKEN}, policies: [b] }\n`,
    'invalid YAML (line 3)',
  ],
];

const expectedMessage = (source: string, lines: string[]) => `${source}: invalid callers:\n${lines.map((line) => `  ${line}`).join('\n')}`;

const expectNoSecret = (text: string) => {
  for (const secret of SECRETS) expect(text).not.toContain(secret);
};

describe('callers file errors never print names or values', () => {
  it.each(cases)('%s: the position and a hash instead', (_kind, text, lines) => {
    const message = (() => {
      try {
        parseCallers(text);
        return 'parsed';
      } catch (error) {
        return (error as Error).message;
      }
    })();
    expect(message).toBe(expectedMessage('callers', lines));
    expectNoSecret(message);
  });

  it('a valid file whose names look like tokens still loads', () => {
    const callers = parseCallers(
      `callers:\n  ${SECRET_NAME}: { token: ${TOKEN}, policies: [orders] }\n  ${SECRET_DIGITS_NAME}: { token: ${OTHER_TOKEN}, policies: ['*'] }\n`,
    );
    expect(callers.byToken(TOKEN)?.name).toBe(SECRET_NAME);
    expect(callers.byToken(OTHER_TOKEN)?.name).toBe(SECRET_DIGITS_NAME);
    expect(callers.size).toBe(2);
  });
});

describe('on a real service process', () => {
  const volume = new ConfigMapVolume(VALID, 'callers.yaml');
  afterAll(() => volume.remove());

  it('at startup: each bad file stops the start with the position and hash, and the output holds no secret', async () => {
    const all = [
      ...cases.map(([kind, text, lines]) => [kind, text, expectedMessage('FILE', lines)]),
      ...yamlCases.map(([kind, text, reason]) => [kind, text, `FILE: ${reason}`]),
    ];
    const startOnce = async ([kind, text, message]: string[], index: number) => {
      const file = `${volume.dir}/startup-${index}.yaml`;
      writeFileSync(file, text!);
      const service = startServiceProcess({ QUOTA_AUTH_TOKENS: file });
      expect(await service.exit, kind).toBe(1);
      const { stdout, stderr } = service.output();
      expect(stderr, kind).toBe(`quota-service: ${message!.replace('FILE', file)}\n`);
      expectNoSecret(stdout + stderr);
    };
    // A few processes at a time: each starts a TypeScript runtime.
    let next = 0;
    const worker = async () => {
      while (next < all.length) {
        const index = next++;
        await startOnce(all[index]!, index);
      }
    };
    await Promise.all([worker(), worker(), worker(), worker()]);
  }, 120_000);

  it('on hot reload: each bad file is rejected with the position and hash, the loaded callers stay, and the output holds no secret', async () => {
    const service = startServiceProcess({ QUOTA_AUTH_TOKENS: volume.file });
    try {
      const channel = createChannel(`127.0.0.1:${await service.port}`);
      await untilServing(channel);
      const client = createClient(QuotaServiceDefinition, channel);
      const codeWith = (token: string) =>
        client.listPolicies({}, { metadata: Metadata({ authorization: `Bearer ${token}` }) }).then(
          () => 'OK',
          (error: unknown) => (error instanceof ClientError ? Status[error.code] : String(error)),
        );
      const all = [
        ...cases.map(([, text, lines]) => [text, expectedMessage(volume.file, lines)]),
        ...yamlCases.map(([, text, reason]) => [text, `${volume.file}: ${reason}`]),
      ];
      for (const [index, [text, reason]] of all.entries()) {
        volume.update(text!);
        const line = await service.logged(/"msg":"callers reload rejected/, index + 1);
        expect(JSON.parse(line).reason).toBe(reason);
      }
      expect(await codeWith(TOKEN)).toBe('OK');
      channel.close();
    } finally {
      service.signal('SIGTERM');
      await service.exit;
    }
    const { stdout, stderr } = service.output();
    expect(stdout).toContain('callers reload rejected');
    expectNoSecret(stdout + stderr);
  }, 120_000);
});
