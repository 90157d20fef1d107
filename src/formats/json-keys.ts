// JSON.parse keeps the last of two equal keys without a word; a header that names a tensor twice is ambiguous, so
// this finds the first repeated key in any object of already-valid JSON text.

interface Frame {
  readonly keys?: Set<string>; // undefined for arrays
  expectKey: boolean;
}

/** The first key that repeats within one object, with the index of its opening quote in `text`; undefined if none. */
export function firstDuplicateKey(text: string): { key: string; index: number } | undefined {
  const stack: Frame[] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '{') stack.push({ keys: new Set(), expectKey: true });
    else if (c === '[') stack.push({ expectKey: false });
    else if (c === '}' || c === ']') stack.pop();
    else if (c === ',') {
      const top = stack[stack.length - 1];
      if (top?.keys) top.expectKey = true;
    } else if (c === '"') {
      const start = i;
      for (i++; text[i] !== '"'; i++) if (text[i] === '\\') i++;
      const top = stack[stack.length - 1];
      if (top?.keys && top.expectKey) {
        const key = JSON.parse(text.slice(start, i + 1)) as string;
        if (top.keys.has(key)) return { key, index: start };
        top.keys.add(key);
        top.expectKey = false;
      }
    }
  }
  return undefined;
}
