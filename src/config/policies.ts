import { readFile } from 'node:fs/promises';
import { parsePolicies, PolicyFileError, type PolicySet } from '@quota-service/core';

export async function loadPolicyFile(path: string): Promise<PolicySet> {
  return (await readPolicyFile(path)).policies;
}

/** The policies and the text they came from (hot reload compares texts). */
export async function readPolicyFile(path: string): Promise<{ text: string; policies: PolicySet }> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new PolicyFileError(`cannot read policy file ${path}: ${(error as Error).message}`);
  }
  return { text, policies: parsePolicies(text, path) };
}
