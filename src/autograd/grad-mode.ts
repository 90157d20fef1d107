// Whether ops record the tape (torch.no_grad / torch.enable_grad). Recording also needs an input that requires
// grad, so inference never pays for it: no nodes, no saved activations.

let enabled = true;

export function isGradEnabled(): boolean {
  return enabled;
}

function withMode<T>(mode: boolean, fn: () => T): T {
  const before = enabled;
  enabled = mode;
  try {
    const r = fn();
    if (r instanceof Promise) throw new TypeError('noGrad/enableGrad: fn must be synchronous (it returned a Promise)');
    return r;
  } finally {
    enabled = before;
  }
}

/** Runs fn with recording off: nothing it computes has a gradient (torch.no_grad). */
export function noGrad<T>(fn: () => T): T {
  return withMode(false, fn);
}

/** Runs fn with recording on, inside a noGrad region too (torch.enable_grad). */
export function enableGrad<T>(fn: () => T): T {
  return withMode(true, fn);
}
