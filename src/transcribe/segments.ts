// How openai/whisper's transcribe() (whisper/transcribe.py) turns one 30 s window's sampled tokens into segments and
// the next seek: consecutive timestamp pairs close segments; a window that ends in a single timestamp was fully
// transcribed (seek moves a whole window); otherwise seek moves to the last timestamp, so speech cut at the window's
// end is decoded again in the next. Without timestamp pairs the window is one segment. Also its text formats.

export interface WindowSegment {
  start: number;
  end: number;
  /** The segment's tokens (timestamps included). */
  tokens: number[];
}

export interface WindowGeometry {
  readonly timestampBegin: number;
  /** The window's start in seconds (seek * hop / sample rate). */
  readonly timeOffset: number;
  /** Mel frames of content in this window (at most 3000). */
  readonly segmentSize: number;
  /** Seconds of content in this window. */
  readonly segmentDuration: number;
  /** Mel frames per timestamp step: 3000 / n_audio_ctx = 2. */
  readonly inputStride: number;
  /** Seconds per timestamp step: 0.02. */
  readonly timePrecision: number;
}

/** The segments of one window's tokens (sampled, up to <|endoftext|> excluded) and how many frames seek advances. */
export function windowSegments(tokens: readonly number[], g: WindowGeometry): { segments: WindowSegment[]; seekAdvance: number } {
  const tb = g.timestampBegin;
  const isTs = tokens.map((t) => t >= tb);
  const singleTimestampEnding = isTs.length >= 2 && !isTs[isTs.length - 2] && isTs[isTs.length - 1];
  const consecutive: number[] = [];
  for (let i = 0; i + 1 < isTs.length; i++) if (isTs[i] && isTs[i + 1]) consecutive.push(i + 1);
  const segments: WindowSegment[] = [];
  if (consecutive.length > 0) {
    const slices = [...consecutive];
    if (singleTimestampEnding) slices.push(tokens.length);
    let lastSlice = 0;
    for (const current of slices) {
      const sliced = tokens.slice(lastSlice, current);
      segments.push({
        start: g.timeOffset + (sliced[0] - tb) * g.timePrecision,
        end: g.timeOffset + (sliced[sliced.length - 1] - tb) * g.timePrecision,
        tokens: sliced,
      });
      lastSlice = current;
    }
    const seekAdvance = singleTimestampEnding ? g.segmentSize : (tokens[lastSlice - 1] - tb) * g.inputStride;
    return { segments, seekAdvance };
  }
  let duration = g.segmentDuration;
  const timestamps = tokens.filter((t) => t >= tb);
  if (timestamps.length > 0 && timestamps[timestamps.length - 1] !== tb) duration = (timestamps[timestamps.length - 1] - tb) * g.timePrecision;
  segments.push({ start: g.timeOffset, end: g.timeOffset + duration, tokens: [...tokens] });
  return { segments, seekAdvance: g.segmentSize };
}

/** openai's format_timestamp: [HH:]MM:SS.mmm, hours always with `alwaysIncludeHours`. */
export function formatTimestamp(seconds: number, alwaysIncludeHours = false, decimalMarker = '.'): string {
  if (!(seconds >= 0)) throw new RangeError(`a timestamp must be >= 0, got ${seconds}`);
  let ms = Math.round(seconds * 1000);
  const hours = Math.floor(ms / 3_600_000);
  ms -= hours * 3_600_000;
  const minutes = Math.floor(ms / 60_000);
  ms -= minutes * 60_000;
  const secs = Math.floor(ms / 1000);
  ms -= secs * 1000;
  const pad = (v: number, n = 2) => String(v).padStart(n, '0');
  return `${alwaysIncludeHours || hours > 0 ? `${pad(hours)}:` : ''}${pad(minutes)}:${pad(secs)}${decimalMarker}${pad(ms, 3)}`;
}

export interface TimedText {
  start: number;
  end: number;
  text: string;
}

/** openai's WriteTXT: each segment's text, stripped, one per line. */
export function toText(segments: readonly TimedText[]): string {
  return segments.map((s) => `${s.text.trim()}\n`).join('');
}

/** openai's WriteSRT: numbered cues, HH:MM:SS,mmm, '-->' in text replaced. */
export function toSrt(segments: readonly TimedText[]): string {
  return segments
    .map((s, i) => `${i + 1}\n${formatTimestamp(s.start, true, ',')} --> ${formatTimestamp(s.end, true, ',')}\n${s.text.trim().replaceAll('-->', '->')}\n\n`)
    .join('');
}

/** openai's WriteVTT: a WEBVTT header, then MM:SS.mmm cues (hours when needed). */
export function toVtt(segments: readonly TimedText[]): string {
  return `WEBVTT\n\n${segments.map((s) => `${formatTimestamp(s.start)} --> ${formatTimestamp(s.end)}\n${s.text.trim().replaceAll('-->', '->')}\n\n`).join('')}`;
}
