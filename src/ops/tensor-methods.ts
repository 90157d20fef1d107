// Gives Tensor its methods (t.add, t.sum, t.backward, ...): core cannot import the ops, so they are handed to it
// here, once, when the ops are first loaded (ops/util.ts, which every op that makes a tensor imports, imports this).
import { backward } from '../autograd/backward.js';
import { installTensorMethods } from '../core/tensor.js';
import { sweepOps } from './grad.js';
import * as ops from './index.js';

installTensorMethods(() => ({ ops, backward: (root, grad) => backward(root, grad, sweepOps) }));
