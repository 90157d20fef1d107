// The text `tensorgpu train` learns when no --data is given: short, plain and repetitive enough that a small model's
// loss visibly falls within a few dozen steps. Written for this project.
export const SAMPLE_TRAINING_TEXT = `A graphics processor runs the same small program on many values at once. Each program reads a few numbers,
multiplies and adds them, and writes a few numbers back. A matrix multiply is many such programs, one for each
output tile, and each tile reads a row of one matrix and a column of the other. The faster the tiles read their
inputs, the faster the whole multiply finishes, so a good kernel keeps its inputs close, in registers and in
workgroup memory, and reads each byte from main memory as few times as it can.

A language model is mostly matrix multiplies. For every token it reads its weights once: the attention
projections, the feed-forward layers and the head that scores every word of the vocabulary. When a model
generates text one token at a time, the time per token is the time to read its weights, and a smaller number
format reads faster. Eight-bit weights read in half the time of sixteen-bit ones.

Training a model adds a backward pass. The forward pass computes the loss; the backward pass computes, for every
weight, how much the loss would change if that weight changed a little. An optimizer then moves every weight a
small step against its gradient. Adam keeps two running averages for each weight, of the gradient and of its
square, and divides one by the square root of the other, so each weight takes a step of about the same size.

Low-rank adapters train far fewer numbers. Next to a frozen weight matrix they add the product of two thin
matrices, and only the thin matrices learn. The frozen weights never change, the adapter is a small file, and
the same base model can carry many adapters, one for each task.
`;
