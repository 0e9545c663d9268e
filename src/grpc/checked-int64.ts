import { createFileRegistry, type DescMessage, fromBinary, ScalarType } from '@bufbuild/protobuf';
import { isReflectMessage, reflect, type ReflectMessage } from '@bufbuild/protobuf/reflect';
import { BinaryReader } from '@bufbuild/protobuf/wire';
import { FileDescriptorSetSchema } from '@bufbuild/protobuf/wkt';
import { InvalidArgumentError } from '@quota-service/core';
import type { CallContext, ServerMiddlewareCall } from 'nice-grpc';
import { descriptorSet } from '../gen/descriptor-set.js';
import { type MessageDecoder, strictUtf8Decode } from './strict-utf8.js';

/**
 * 64-bit integer fields of requests beyond what a number holds exactly,
 * ±(2^53 - 1). The generated decoder throws for them, which grpc-js answers
 * with INTERNAL ("Error deserializing request") before any middleware sees
 * the call, so nothing audits it either. Decoded here, such a field holds NaN
 * instead (no 64-bit integer decodes to NaN otherwise, and every check of a
 * number refuses it), and the request remembers the first such field, which
 * `int64RangeMiddleware` then refuses with INVALID_ARGUMENT naming it.
 */
const LARGEST = BigInt(Number.MAX_SAFE_INTEGER);

/** Set while a decode read a value out of range: decoding is synchronous, one request at a time. */
let outOfRangeRead = false;

function inRange(value: bigint | string): bigint | string {
  if (Number.isSafeInteger(Number(value))) return value;
  outOfRangeRead = true;
  return 'NaN';
}

class CheckedInt64Reader extends BinaryReader {
  override int64() {
    return inRange(super.int64());
  }
  override uint64() {
    return inRange(super.uint64());
  }
  override sint64() {
    return inRange(super.sint64());
  }
  override fixed64() {
    return inRange(super.fixed64());
  }
  override sfixed64() {
    return inRange(super.sfixed64());
  }
}

/** Requests that carried a value out of range: the first such field and the value as sent. */
const outOfRange = new WeakMap<object, { field: string; value: string }>();

/**
 * A request deserializer (strict UTF-8 too, src/grpc/strict-utf8.ts) that
 * never throws for a 64-bit integer out of range; `typeName` is the message's
 * full name in proto/, e.g. quota.v1.SetOverrideRequest.
 */
export function checkedInt64Decode<T extends object>(type: MessageDecoder<T>, typeName: string): (bytes: Uint8Array) => T {
  const decode = strictUtf8Decode(type, CheckedInt64Reader);
  return (bytes) => {
    outOfRangeRead = false;
    const message = decode(bytes);
    if (outOfRangeRead) outOfRange.set(message, firstOutOfRange(typeName, bytes));
    return message;
  };
}

/** Refuses a request that carried a 64-bit integer out of range, naming the field and the value. */
export async function* int64RangeMiddleware<Request, Response>(call: ServerMiddlewareCall<Request, Response>, context: CallContext) {
  const found = typeof call.request === 'object' && call.request !== null ? outOfRange.get(call.request) : undefined;
  if (found !== undefined) {
    throw new InvalidArgumentError(
      found.field,
      `${found.value} is out of range: integers here go from -${Number.MAX_SAFE_INTEGER} to ${Number.MAX_SAFE_INTEGER} (2^53 - 1)`,
    );
  }
  return yield* call.next(call.request, context);
}

let registry: ReturnType<typeof createFileRegistry> | undefined;

/** The first field out of range, found again with the message's schema: field names and exact values. */
function firstOutOfRange(typeName: string, bytes: Uint8Array): { field: string; value: string } {
  const unnamed = { field: '(a 64-bit integer field)', value: 'a value' };
  try {
    registry ??= createFileRegistry(fromBinary(FileDescriptorSetSchema, descriptorSet));
    const schema: DescMessage | undefined = registry.getMessage(typeName);
    return (schema && findIn(reflect(schema, fromBinary(schema, bytes)), '')) ?? unnamed;
  } catch {
    return unnamed;
  }
}

const WIDE = new Set([ScalarType.INT64, ScalarType.UINT64, ScalarType.SINT64, ScalarType.FIXED64, ScalarType.SFIXED64]);

function findIn(message: ReflectMessage, prefix: string): { field: string; value: string } | undefined {
  for (const field of message.fields) {
    if (!message.isSet(field)) continue;
    const path = prefix + field.name;
    const check = (value: unknown, at: string) => {
      if (isReflectMessage(value)) return findIn(value, `${at}.`);
      if ((typeof value === 'bigint' || typeof value === 'string') && field.scalar !== undefined && WIDE.has(field.scalar)) {
        const wide = BigInt(value);
        if (wide > LARGEST || wide < -LARGEST) return { field: at, value: wide.toString() };
      }
      return undefined;
    };
    if (field.fieldKind === 'scalar' || field.fieldKind === 'message') {
      const found = check(message.get(field), path);
      if (found) return found;
    } else if (field.fieldKind === 'list') {
      let i = 0;
      for (const item of message.get(field)) {
        const found = check(item, `${path}[${i++}]`);
        if (found) return found;
      }
    } else if (field.fieldKind === 'map') {
      for (const [key, item] of message.get(field)) {
        const found = check(item, `${path}[${String(key)}]`);
        if (found) return found;
      }
    }
  }
  return undefined;
}
