/** CRC16-CCITT (XModem), the hash Redis Cluster slots keys by, one byte at a time. */
const CRC16 = new Uint16Array(256);
for (let byte = 0; byte < 256; byte++) {
  let crc = byte << 8;
  for (let bit = 0; bit < 8; bit++) crc = crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1;
  CRC16[byte] = crc & 0xffff;
}

/**
 * The hash slot of a key, as Redis Cluster computes it (CLUSTER KEYSLOT): the
 * CRC16 of its hash tag (the bytes between the first `{` and the next `}`,
 * when there are any) or else of the whole key, modulo 16384, over the UTF-8
 * bytes the key is sent as. The service asks for a few slots per decision and
 * its keys are ASCII, so it reads the characters in place (cluster-key-slot
 * copies every key into an array of its bytes first, and for a key such as
 * `{}{a}` hashes `a` where Redis hashes the whole key).
 */
export function keySlot(key: string): number {
  let start = 0;
  let end = key.length;
  const open = key.indexOf('{');
  if (open !== -1) {
    const close = key.indexOf('}', open + 1);
    if (close > open + 1) {
      start = open + 1;
      end = close;
    }
  }
  let crc = 0;
  for (let i = start; i < end; i++) {
    const char = key.charCodeAt(i);
    if (char >= 0x80) return bytesSlot(Buffer.from(key.slice(start, end), 'utf8'));
    crc = ((crc << 8) & 0xffff) ^ CRC16[((crc >> 8) ^ char) & 0xff]!;
  }
  return crc & 0x3fff;
}

/** The slot of the bytes to hash (the tag, or the whole key) of a key that is not all ASCII. */
function bytesSlot(bytes: Buffer): number {
  let crc = 0;
  for (let i = 0; i < bytes.length; i++) crc = ((crc << 8) & 0xffff) ^ CRC16[((crc >> 8) ^ bytes[i]!) & 0xff]!;
  return crc & 0x3fff;
}
