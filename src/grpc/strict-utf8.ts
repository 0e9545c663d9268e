import { BinaryReader } from '@bufbuild/protobuf/wire';

/** A generated message codec (ts-proto): decode reads from a BinaryReader it is given. */
export interface MessageDecoder<T> {
  decode(input: BinaryReader | Uint8Array, length?: number): T;
}

/**
 * Marks a string that came from bytes that are not valid UTF-8. A lone
 * surrogate: no valid UTF-8 decodes to one, so a marked string is never
 * well-formed (String.prototype.isWellFormed) and request validation refuses
 * it, naming the field (`identity.user: not valid UTF-8`).
 */
const INVALID_MARK = '\uDC00';

const fatalDecoder = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** Thrown by the strict pass, made once: the fallback pass is the only thing that catches it. */
const NOT_UTF8 = new Error('not valid UTF-8');

function utf8OrThrow(bytes: Uint8Array): string {
  try {
    return fatalDecoder.decode(bytes);
  } catch {
    throw NOT_UTF8;
  }
}

/**
 * The text of valid UTF-8; otherwise the mark followed by the bytes
 * themselves, one character each, so that two different invalid values never
 * become the same string (a lenient decoder turns `61 ff` and `61 fe` both
 * into "a\uFFFD", the key of a valid identity).
 */
export function utf8OrMarked(bytes: Uint8Array): string {
  try {
    return fatalDecoder.decode(bytes);
  } catch {
    return INVALID_MARK + Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
  }
}

/**
 * A request deserializer that keeps invalid UTF-8 apart from valid text.
 * Every string is decoded strictly (ASCII never reaches the decoder at all),
 * so a valid request is decoded once, as fast as before. Only a request with
 * invalid bytes in some string is decoded a second time, with those strings
 * marked; the handler then answers INVALID_ARGUMENT naming the field. The
 * deserializer itself never throws for it: grpc-js would answer INTERNAL.
 * A `Reader` subclass may read other fields its own way (src/grpc/checked-int64.ts).
 */
export function strictUtf8Decode<T>(type: MessageDecoder<T>, Reader: typeof BinaryReader = BinaryReader): (bytes: Uint8Array) => T {
  return (bytes) => {
    try {
      return type.decode(new Reader(bytes, utf8OrThrow));
    } catch (error) {
      if (error !== NOT_UTF8) throw error;
      return type.decode(new Reader(bytes, utf8OrMarked));
    }
  };
}
