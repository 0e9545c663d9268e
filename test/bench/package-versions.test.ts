import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { packageVersions } from '../../bench/package-versions.js';

describe('packageVersions', () => {
  it('reads the installed version of each package, scoped ones too, and says unknown for one not installed', () => {
    const installed = (name: string) => (JSON.parse(readFileSync(`node_modules/${name}/package.json`, 'utf8')) as { version: string }).version;
    expect(packageVersions(['ioredis', '@grpc/grpc-js', 'no-such-package-here'])).toEqual({
      ioredis: installed('ioredis'),
      '@grpc/grpc-js': installed('@grpc/grpc-js'),
      'no-such-package-here': 'unknown',
    });
  });
});
