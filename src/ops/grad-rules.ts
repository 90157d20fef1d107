// Backward rules of the differentiable ops, written with the forward ops themselves (recording is off while they
// run). Each returns one gradient per op input, already summed over broadcast dims; the sweep casts it to the
// input's dtype. PyTorch's formulas (tools/autograd/derivatives.yaml) are the reference.
import type { BinaryOp, UnaryOp } from '../runtime/backend.js';
import type { Shape } from '../core/shape.js';
import type { Tensor } from '../core/tensor.js';
import * as ops from './index.js';

/** t in float32: itself when it already is (to() always copies). */
export function float32(t: Tensor): Tensor {
  return t.dtype === 'float32' ? t : t.to('float32');
}

/** d softmax along dim from its output y: y (g - sum(g y)). */
export function softmaxBackward(y: Tensor, g: Tensor, dim: number): Tensor {
  return y.mul(g.sub(g.mul(y).sum(dim, { keepdim: true })));
}

/** g summed down to `shape` (the inverse of broadcasting): leading dims away, size-1 dims kept. */
export function sumTo(g: Tensor, shape: Shape): Tensor {
  let r = g;
  const own = () => r !== g;
  while (r.ndim > shape.length) {
    const s = r.sum(0);
    if (own()) r.dispose();
    r = s;
  }
  for (let d = 0; d < shape.length; d++) {
    if (shape[d] === 1 && r.shape[d] !== 1) {
      const s = r.sum(d, { keepdim: true });
      if (own()) r.dispose();
      r = s;
    }
  }
  // A view when nothing was summed: the sweep disposes the output gradient it passed in.
  return own() ? r : g.reshape(shape);
}

type Grads = readonly (Tensor | undefined)[];

/**
 * d(x op y) for the arithmetic ops; x and y are the inputs (numbers for JS-number operands), out the result, needs
 * which of them want a gradient.
 */
export function binaryRule(op: BinaryOp, g: Tensor, x: Tensor | number, y: Tensor | number, out: Tensor, needs: readonly boolean[]): Grads {
  const gx = (f: () => Tensor) => (needs[0] ? sumTo(f(), (x as Tensor).shape) : undefined);
  const gy = (f: () => Tensor) => (needs[1] ? sumTo(f(), (y as Tensor).shape) : undefined);
  switch (op) {
    case 'add':
      return [gx(() => g), gy(() => g)];
    case 'sub':
      return [gx(() => g), gy(() => g.neg())];
    case 'mul':
      return [gx(() => ops.mul(g, y)), gy(() => ops.mul(g, x))];
    case 'div':
      // d/dy (x / y) = -x / y^2 = -out / y.
      return [gx(() => ops.div(g, y)), gy(() => ops.div(ops.mul(g, out), y).neg())];
    case 'pow': {
      // d/dx = y x^(y-1) (0 where y == 0, as PyTorch); d/dy = out log(x) (0 where x == 0 and y >= 0).
      const dx = () => {
        const yMinus1 = typeof y === 'number' ? ops.pow(x, y - 1) : ops.pow(x, ops.sub(y, 1));
        const d = ops.mul(ops.mul(g, y), yMinus1);
        return typeof y === 'number' ? (y === 0 ? ops.mul(d, 0) : d) : ops.where(ops.eq(y, 0), 0, d);
      };
      const dy = () => {
        const d = ops.mul(ops.mul(g, out), ops.log(typeof x === 'number' ? ops.full([], x, { dtype: out.dtype, device: out.device }) : x));
        if (typeof x === 'number') return x === 0 ? ops.mul(d, 0) : d;
        return ops.where(ops.eq(x, 0), ops.where(ops.ge(y as Tensor, 0), 0, d), d);
      };
      return [gx(dx), gy(dy)];
    }
    case 'maximum':
    case 'minimum': {
      // The gradient goes to the selected input; a tie splits it in half (PyTorch).
      const half = ops.mul(g, 0.5);
      const pick = (a: Tensor | number, b: Tensor | number) => ops.where(ops.eq(a, b), half, ops.where(op === 'maximum' ? ops.gt(a, b) : ops.lt(a, b), g, 0));
      return [gx(() => pick(x, y)), gy(() => pick(y, x))];
    }
    case 'remainder':
    case 'fmod': {
      // x - y * q with q = floor(x / y) or trunc(x / y), piecewise constant: d/dx = 1, d/dy = -q.
      const q = () => {
        const ratio = ops.div(x, y);
        return op === 'remainder' ? ops.floor(ratio) : ops.where(ops.lt(ratio, 0), ops.ceil(ratio), ops.floor(ratio));
      };
      return [gx(() => g), gy(() => ops.mul(g, q()).neg())];
    }
    case 'floor_divide':
      return [gx(() => ops.mul(g, 0)), gy(() => ops.mul(g, 0))];
    default:
      return [undefined, undefined]; // comparisons: no gradient
  }
}

/** d op(x) for the unary ops; x is the input, out the result. */
export function unaryRule(op: UnaryOp, g: Tensor, x: Tensor, out: Tensor): Tensor {
  switch (op) {
    case 'neg':
      return g.neg();
    case 'abs':
      // sign(x), 0 at 0 (PyTorch's sgn).
      return ops.mul(g, ops.sub(ops.gt(x, 0).to(g.dtype), ops.lt(x, 0).to(g.dtype)));
    case 'relu':
      return ops.where(ops.gt(out, 0), g, 0);
    case 'exp':
      return ops.mul(g, out);
    case 'log':
      return ops.div(g, x);
    case 'sqrt':
      return ops.div(g, ops.mul(out, 2));
    case 'rsqrt':
      // d x^(-1/2) = -1/2 x^(-3/2) = -out^3 / 2.
      return ops.mul(ops.mul(g, ops.pow(out, 3)), -0.5);
    case 'tanh':
      return ops.mul(g, ops.sub(1, ops.mul(out, out)));
    case 'sigmoid':
      return ops.mul(g, ops.mul(out, ops.sub(1, out)));
    case 'silu':
      return ops.gradMap('silu_grad', x, g);
    case 'gelu':
      return ops.gradMap('gelu_grad', x, g);
    case 'gelu_tanh':
      return ops.gradMap('gelu_tanh_grad', x, g);
    case 'sin':
      return ops.mul(g, ops.cos(x));
    case 'cos':
      return ops.mul(g, ops.sin(x)).neg();
    case 'erf':
      // 2 / sqrt(pi) exp(-x^2).
      return ops.mul(g, ops.mul(ops.exp(ops.mul(x, x).neg()), 1.1283791670955126));
    case 'floor':
    case 'ceil':
    case 'round':
    case 'sign':
      return ops.mul(g, 0);
    case 'reciprocal':
      return ops.mul(g, ops.mul(out, out)).neg();
  }
}
