// A strict multipart/form-data reader (RFC 7578 over RFC 2046's multipart syntax) for the audio routes, over a body
// fastify has already collected into one buffer (its bodyLimit bounds the whole). Every part needs a
// `Content-Disposition: form-data; name="..."` header; a part with a filename is a file, any other a UTF-8 text field.
// Anything malformed (no boundary, a missing delimiter, headers without their blank line, a body that ends before the
// close delimiter, too many parts, a field too long, bytes that are not UTF-8) is a MultipartError naming what and
// where, which the route answers with 400.
import { ApiError } from './errors.js';

export class MultipartError extends ApiError {
  constructor(message: string) {
    super(400, `multipart/form-data: ${message}`, 'invalid_request_error', null, 'invalid_multipart');
  }
}

export interface MultipartFile {
  /** The field name (`file` for the audio routes). */
  readonly name: string;
  readonly filename: string;
  /** The part's Content-Type, lower-cased without parameters ('application/octet-stream' when absent). */
  readonly contentType: string;
  readonly data: Uint8Array;
}

export interface MultipartForm {
  /** Text fields by name, every value in order (`timestamp_granularities[]` repeats). */
  readonly fields: ReadonlyMap<string, readonly string[]>;
  readonly files: readonly MultipartFile[];
}

export interface MultipartLimits {
  /** Parts at most (default 64). */
  maxParts?: number;
  /** Bytes of one text field at most (default 64 KiB). */
  maxFieldBytes?: number;
  /** Bytes of one part's header block at most (default 8 KiB). */
  maxHeaderBytes?: number;
}

/** The boundary of a `multipart/form-data; boundary=...` Content-Type, or a MultipartError. */
export function multipartBoundary(contentType: string | undefined): string {
  if (!contentType) throw new MultipartError('the request has no Content-Type');
  const [type, params] = splitParams(contentType);
  if (type.toLowerCase() !== 'multipart/form-data') throw new MultipartError(`expected Content-Type multipart/form-data, got '${type}'`);
  const boundary = params.get('boundary');
  if (boundary === undefined) throw new MultipartError('the Content-Type has no boundary parameter');
  // RFC 2046: 1 to 70 characters from bchars, not ending in a space.
  if (!/^[0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?]$/.test(boundary))
    throw new MultipartError(`the boundary '${boundary.slice(0, 80)}' is not 1 to 70 allowed characters`);
  return boundary;
}

/** `type; a=1; b="x y"` -> ['type', Map {a: '1', b: 'x y'}] (names lower-cased; quoted values unescaped). */
function splitParams(header: string): [string, Map<string, string>] {
  const semi = header.indexOf(';');
  const head = (semi < 0 ? header : header.slice(0, semi)).trim();
  const params = new Map<string, string>();
  let rest = semi < 0 ? '' : header.slice(semi + 1);
  const param = /^\s*([!#$%&'*+\-.^_`|~0-9A-Za-z]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;\s]*))\s*(?:;|$)/;
  while (rest.trim() !== '') {
    const m = param.exec(rest);
    if (!m) throw new MultipartError(`cannot read the header parameters '${rest.trim().slice(0, 80)}'`);
    const name = m[1]!.toLowerCase();
    if (params.has(name)) throw new MultipartError(`the header parameter '${name}' is given twice`);
    params.set(name, m[2] !== undefined ? m[2].replace(/\\(.)/g, '$1') : m[3]!);
    rest = rest.slice(m[0].length);
  }
  return [head, params];
}

function indexOf(body: Uint8Array, needle: Uint8Array, from: number): number {
  return Buffer.from(body.buffer, body.byteOffset, body.byteLength).indexOf(needle, from);
}

const HEADER_END = Buffer.from('\r\n\r\n');
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** Reads a whole multipart/form-data body. */
export function parseMultipart(body: Uint8Array, contentType: string | undefined, limits: MultipartLimits = {}): MultipartForm {
  const boundary = multipartBoundary(contentType);
  const maxParts = limits.maxParts ?? 64;
  const maxFieldBytes = limits.maxFieldBytes ?? 64 << 10;
  const maxHeaderBytes = limits.maxHeaderBytes ?? 8 << 10;
  // Every delimiter after the first is preceded by CRLF, which belongs to it and not to the part before.
  const first = Buffer.from(`--${boundary}`);
  const delimiter = Buffer.from(`\r\n--${boundary}`);
  let at: number;
  if (body.length >= first.length && Buffer.from(body.buffer, body.byteOffset, first.length).equals(first)) at = first.length;
  else {
    // A preamble (ignored) ends in CRLF before the first delimiter.
    const found = indexOf(body, delimiter, 0);
    if (found < 0) throw new MultipartError(`the body has no '--${boundary}' delimiter`);
    at = found + delimiter.length;
  }
  const fields = new Map<string, string[]>();
  const files: MultipartFile[] = [];
  for (let part = 0; ; part++) {
    // After a delimiter: '--' closes the body, else optional whitespace (transport padding) and CRLF start a part.
    if (body[at] === 0x2d && body[at + 1] === 0x2d) break;
    while (body[at] === 0x20 || body[at] === 0x09) at++;
    if (body[at] !== 0x0d || body[at + 1] !== 0x0a) {
      throw new MultipartError(at >= body.length ? 'the body ends without the close delimiter' : `expected CRLF after the boundary at byte ${at}`);
    }
    at += 2;
    if (part >= maxParts) throw new MultipartError(`more than ${maxParts} parts`);
    const headerEnd = indexOf(body, HEADER_END, at);
    // A part without headers starts with the blank line right away.
    const noHeaders = body[at] === 0x0d && body[at + 1] === 0x0a;
    const blockEnd = noHeaders ? at : headerEnd;
    if (blockEnd < 0 || blockEnd - at > maxHeaderBytes)
      throw new MultipartError(`part ${part + 1}'s headers ${blockEnd < 0 ? 'do not end in a blank line' : `are longer than ${maxHeaderBytes} bytes`}`);
    const headers = new Map<string, string>();
    if (!noHeaders) {
      for (const line of Buffer.from(body.buffer, body.byteOffset + at, blockEnd - at)
        .toString('latin1')
        .split('\r\n')) {
        const colon = line.indexOf(':');
        if (colon <= 0) throw new MultipartError(`part ${part + 1} has a header line without a name: '${line.slice(0, 80)}'`);
        headers.set(line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim());
      }
    }
    const start = noHeaders ? at + 2 : headerEnd + HEADER_END.length;
    const end = indexOf(body, delimiter, start);
    if (end < 0) throw new MultipartError(`part ${part + 1} is not followed by a '--${boundary}' delimiter (the body is cut short?)`);
    at = end + delimiter.length;

    const disposition = headers.get('content-disposition');
    if (disposition === undefined) throw new MultipartError(`part ${part + 1} has no Content-Disposition header`);
    const [kind, params] = splitParams(disposition);
    const name = params.get('name');
    if (kind.toLowerCase() !== 'form-data' || name === undefined)
      throw new MultipartError(`part ${part + 1}'s Content-Disposition must be form-data with a name, got '${disposition.slice(0, 120)}'`);
    const data = body.subarray(start, end);
    const filename = params.get('filename');
    if (filename !== undefined) {
      const type = headers.get('content-type');
      files.push({ name, filename, contentType: type ? splitParams(type)[0].toLowerCase() : 'application/octet-stream', data });
      continue;
    }
    if (data.length > maxFieldBytes) throw new MultipartError(`the field '${name}' is longer than ${maxFieldBytes} bytes`);
    let value: string;
    try {
      value = utf8.decode(data);
    } catch {
      throw new MultipartError(`the field '${name}' is not UTF-8 text (a file part needs a filename in its Content-Disposition)`);
    }
    const list = fields.get(name);
    if (list) list.push(value);
    else fields.set(name, [value]);
  }
  return { fields, files };
}
