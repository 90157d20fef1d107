// A small ONNX model writer for the benchmarks page: ONNX Runtime Web runs models, not ops, so each benchmark case
// (a MatMul, a Softmax, a chain of Adds and Muls) becomes a one-graph ModelProto encoded here. Only the protobuf
// fields those graphs need are written (onnx/onnx.proto: ModelProto, GraphProto, NodeProto, AttributeProto,
// ValueInfoProto, TypeProto.Tensor, TensorShapeProto), all float32 inputs with static shapes.

export interface OnnxNode {
  op: string;
  inputs: string[];
  outputs: string[];
  /** Integer attributes (e.g. Softmax's axis). */
  ints?: Record<string, number>;
}

export interface OnnxGraph {
  inputs: Record<string, number[]>;
  outputs: Record<string, number[]>;
  nodes: OnnxNode[];
  /** The default-domain opset (13 and later have Softmax over one axis). */
  opset?: number;
}

const FLOAT = 1;
const ATTRIBUTE_INT = 2;

/** Protobuf wire writer: varints, length-delimited fields and nested messages. */
class Writer {
  private readonly bytes: number[] = [];

  varint(value: number): this {
    // Negative int64s are ten bytes in two's complement; ONNX's dims and attributes here are never negative.
    if (value < 0 || !Number.isSafeInteger(value)) throw new RangeError(`onnx-graph: cannot encode ${value}`);
    let v = value;
    while (v >= 0x80) {
      this.bytes.push((v % 0x80) | 0x80);
      v = Math.floor(v / 0x80);
    }
    this.bytes.push(v);
    return this;
  }

  int(field: number, value: number): this {
    return this.varint(field << 3).varint(value);
  }

  bytesField(field: number, data: Uint8Array): this {
    this.varint((field << 3) | 2).varint(data.length);
    for (const b of data) this.bytes.push(b);
    return this;
  }

  string(field: number, text: string): this {
    return this.bytesField(field, new TextEncoder().encode(text));
  }

  message(field: number, build: (w: Writer) => void): this {
    const inner = new Writer();
    build(inner);
    return this.bytesField(field, inner.finish());
  }

  finish(): Uint8Array {
    return Uint8Array.from(this.bytes);
  }
}

function valueInfo(w: Writer, field: number, name: string, shape: number[]): void {
  w.message(field, (v) =>
    v
      .string(1, name)
      .message(2, (type) => type.message(1, (tensor) => tensor.int(1, FLOAT).message(2, (s) => shape.forEach((d) => s.message(1, (dim) => dim.int(1, d)))))),
  );
}

/** The serialized ModelProto of `graph` (IR version 8). */
export function onnxModel(graph: OnnxGraph): Uint8Array {
  const w = new Writer();
  w.int(1, 8); // ir_version
  w.string(2, 'tensorgpu-bench'); // producer_name
  w.message(7, (g) => {
    graph.nodes.forEach((node, i) =>
      g.message(1, (n) => {
        node.inputs.forEach((x) => n.string(1, x));
        node.outputs.forEach((y) => n.string(2, y));
        n.string(3, `n${i}`).string(4, node.op);
        for (const [name, value] of Object.entries(node.ints ?? {})) n.message(5, (a) => a.string(1, name).int(3, value).int(20, ATTRIBUTE_INT));
      }),
    );
    g.string(2, 'bench');
    for (const [name, shape] of Object.entries(graph.inputs)) valueInfo(g, 11, name, shape);
    for (const [name, shape] of Object.entries(graph.outputs)) valueInfo(g, 12, name, shape);
  });
  w.message(8, (o) => o.string(1, '').int(2, graph.opset ?? 17)); // opset_import
  return w.finish();
}
