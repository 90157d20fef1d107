"""A literal numpy (float64) port of diffusers' AutoencoderKLWan
(src/diffusers/models/autoencoders/autoencoder_kl_wan.py as of diffusers commit e87b2a7a, the last to change that file
before main's 58eb52c0), used as an independent golden reference for src/models/wan-vae/. With _class_name
AutoencoderKLQwenImage it follows autoencoder_kl_qwenimage.py where that differs for these shapes: the spatial ratio is
2 ** len(temperal_downsample) and tiled_decode does not clamp. Module structure, feat_cache / feat_idx bookkeeping (including the "Rep" marker),
chunking, tiling and blending follow diffusers line by line; only torch ops are replaced by numpy equivalents.

Usage: python3 tools/wan-vae-reference/wan_vae_reference.py [fixtureRoot] [outDir]
  fixtureRoot: what tools/wan-vae-reference/make-inputs.ts wrote (default $TMPDIR/wan-vae-fixture), one folder per preset
  with config.json, diffusion_pytorch_model.safetensors and inputs.safetensors.
  outDir: where <preset>.safetensors (inputs + expected outputs, float32) go (default test/fixtures/wan-vae).
"""

import json
import math
import os
import struct
import sys
import tempfile

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

CACHE_T = 2

# ---------------------------------------------------------------------------------------------------------------
# safetensors


_ST_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "I32": np.int32, "I64": np.int64}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n].decode("utf-8"))
    base = 8 + n
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        fmt = e["dtype"]
        if fmt == "BF16":
            raw = np.frombuffer(data[base + e["data_offsets"][0] : base + e["data_offsets"][1]], dtype="<u2")
            arr = (raw.astype(np.uint32) << 16).view(np.float32)
        else:
            dt = np.dtype(_ST_DTYPES[fmt]).newbyteorder("<")
            arr = np.frombuffer(data[base + e["data_offsets"][0] : base + e["data_offsets"][1]], dtype=dt)
        out[name] = arr.reshape(e["shape"]).astype(np.float64)
    return out


def write_safetensors(path, tensors):
    header = {}
    at = 0
    blobs = []
    for name, arr in tensors:
        a = np.ascontiguousarray(arr, dtype="<f4")
        b = a.tobytes()
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [at, at + len(b)]}
        at += len(b)
        blobs.append(b)
    js = json.dumps(header, separators=(",", ":")).encode("utf-8")
    js += b" " * ((8 - len(js) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)))
        f.write(js)
        for b in blobs:
            f.write(b)


# ---------------------------------------------------------------------------------------------------------------
# torch primitives


def F_pad(x, pad):
    """torch.nn.functional.pad (constant zeros) with pairs from the last dim backwards; negative pads crop."""
    pad = list(pad)
    nd = x.ndim
    widths = [(0, 0)] * nd
    crops = [slice(None)] * nd
    for i in range(len(pad) // 2):
        d = nd - 1 - i
        lo, hi = pad[2 * i], pad[2 * i + 1]
        widths[d] = (max(lo, 0), max(hi, 0))
        crops[d] = slice(-lo if lo < 0 else None, hi if hi < 0 else None)
    x = x[tuple(crops)]
    return np.pad(x, widths)


def conv3d(x, weight, bias, stride=(1, 1, 1)):
    """nn.Conv3d with padding 0: x [B, C, T, H, W], weight [O, C, kt, kh, kw]."""
    kt, kh, kw = weight.shape[2:]
    win = sliding_window_view(x, (kt, kh, kw), axis=(2, 3, 4))
    win = win[:, :, :: stride[0], :: stride[1], :: stride[2]]
    y = np.einsum("bcthwijk,ocijk->bothw", win, weight, optimize=True)
    return y + bias.reshape(1, -1, 1, 1, 1)


def conv2d(x, weight, bias, stride=(1, 1), padding=0):
    """nn.Conv2d: x [N, C, H, W], weight [O, C, kh, kw]."""
    if padding:
        x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    y = conv3d(x[:, :, None], weight[:, :, None], bias, (1, stride[0], stride[1]))
    return y[:, :, 0]


def silu(x):
    return x / (1.0 + np.exp(-x))


def F_normalize(x, dim, eps=1e-12):
    n = np.sqrt(np.sum(x * x, axis=dim, keepdims=True))
    return x / np.maximum(n, eps)


def upsample_nearest_exact(x, scale=2.0):
    """nn.Upsample(scale_factor=(s, s), mode='nearest-exact') on [N, C, H, W]: src = min(floor((dst + 0.5) / s), in - 1)."""
    _, _, h, w = x.shape
    oh, ow = int(math.floor(h * scale)), int(math.floor(w * scale))
    ih = np.minimum(np.floor((np.arange(oh) + 0.5) * (1.0 / scale)).astype(np.int64), h - 1)
    iw = np.minimum(np.floor((np.arange(ow) + 0.5) * (1.0 / scale)).astype(np.int64), w - 1)
    return x[:, :, ih][:, :, :, iw]


def sdpa(q, k, v):
    """F.scaled_dot_product_attention, no mask, scale 1 / sqrt(E)."""
    s = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p = p / p.sum(axis=-1, keepdims=True)
    return p @ v


def is_rep(c):
    # diffusers compares `feat_cache[idx] == "Rep"`; for a tensor that comparison is False.
    return isinstance(c, str) and c == "Rep"


# ---------------------------------------------------------------------------------------------------------------
# modules


class Weights:
    def __init__(self, tensors):
        self.t = tensors
        self.used = set()

    def __call__(self, name):
        self.used.add(name)
        return self.t[name]


class AvgDown3D:
    def __init__(self, in_channels, out_channels, factor_t, factor_s=1):
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.factor_t = factor_t
        self.factor_s = factor_s
        self.factor = self.factor_t * self.factor_s * self.factor_s
        assert in_channels * self.factor % out_channels == 0
        self.group_size = in_channels * self.factor // out_channels

    def forward(self, x):
        pad_t = (self.factor_t - x.shape[2] % self.factor_t) % self.factor_t
        pad = (0, 0, 0, 0, pad_t, 0)
        x = F_pad(x, pad)
        B, C, T, H, W = x.shape
        x = x.reshape(B, C, T // self.factor_t, self.factor_t, H // self.factor_s, self.factor_s, W // self.factor_s, self.factor_s)
        x = np.ascontiguousarray(x.transpose(0, 1, 3, 5, 7, 2, 4, 6))
        x = x.reshape(B, C * self.factor, T // self.factor_t, H // self.factor_s, W // self.factor_s)
        x = x.reshape(B, self.out_channels, self.group_size, T // self.factor_t, H // self.factor_s, W // self.factor_s)
        return x.mean(axis=2)


class DupUp3D:
    def __init__(self, in_channels, out_channels, factor_t, factor_s=1):
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.factor_t = factor_t
        self.factor_s = factor_s
        self.factor = self.factor_t * self.factor_s * self.factor_s
        assert out_channels * self.factor % in_channels == 0
        self.repeats = out_channels * self.factor // in_channels

    def forward(self, x, first_chunk=False):
        x = np.repeat(x, self.repeats, axis=1)  # repeat_interleave
        x = x.reshape(x.shape[0], self.out_channels, self.factor_t, self.factor_s, self.factor_s, x.shape[2], x.shape[3], x.shape[4])
        x = np.ascontiguousarray(x.transpose(0, 1, 5, 2, 6, 3, 7, 4))
        x = x.reshape(x.shape[0], self.out_channels, x.shape[2] * self.factor_t, x.shape[4] * self.factor_s, x.shape[6] * self.factor_s)
        if first_chunk:
            x = x[:, :, self.factor_t - 1 :, :, :]
        return x


def _triple(v):
    return tuple(v) if isinstance(v, (tuple, list)) else (v, v, v)


class WanCausalConv3d:
    def __init__(self, w, name, in_channels, out_channels, kernel_size, stride=1, padding=0):
        self.weight = w(f"{name}.weight")
        self.bias = w(f"{name}.bias")
        ks = _triple(kernel_size)
        assert self.weight.shape == (out_channels, in_channels, *ks), (name, self.weight.shape)
        self.stride = _triple(stride)
        p = _triple(padding)
        self._padding = (p[2], p[2], p[1], p[1], 2 * p[0], 0)

    def forward(self, x, cache_x=None):
        padding = list(self._padding)
        if cache_x is not None and self._padding[4] > 0:
            x = np.concatenate([cache_x, x], axis=2)
            padding[4] -= cache_x.shape[2]
        x = F_pad(x, padding)
        return conv3d(x, self.weight, self.bias, self.stride)

    __call__ = forward


class WanRMS_norm:
    def __init__(self, w, name, dim, channel_first=True, images=True):
        self.channel_first = channel_first
        self.scale = dim**0.5
        self.gamma = w(f"{name}.gamma")
        broadcastable_dims = (1, 1, 1) if not images else (1, 1)
        assert self.gamma.shape == (dim, *broadcastable_dims), (name, self.gamma.shape)

    def __call__(self, x):
        return F_normalize(x, dim=(1 if self.channel_first else -1)) * self.scale * self.gamma


class Conv2d:
    def __init__(self, w, name, cin, cout, k, stride=1, padding=0):
        self.weight = w(f"{name}.weight")
        self.bias = w(f"{name}.bias")
        assert self.weight.shape == (cout, cin, k, k), (name, self.weight.shape)
        self.stride = (stride, stride) if isinstance(stride, int) else stride
        self.padding = padding

    def __call__(self, x):
        return conv2d(x, self.weight, self.bias, self.stride, self.padding)


class WanResample:
    def __init__(self, w, name, dim, mode, upsample_out_dim=None):
        self.dim = dim
        self.mode = mode
        if upsample_out_dim is None:
            upsample_out_dim = dim // 2
        if mode == "upsample2d":
            conv = Conv2d(w, f"{name}.resample.1", dim, upsample_out_dim, 3, padding=1)
            self.resample = lambda x: conv(upsample_nearest_exact(x))
        elif mode == "upsample3d":
            conv = Conv2d(w, f"{name}.resample.1", dim, upsample_out_dim, 3, padding=1)
            self.resample = lambda x: conv(upsample_nearest_exact(x))
            self.time_conv = WanCausalConv3d(w, f"{name}.time_conv", dim, dim * 2, (3, 1, 1), padding=(1, 0, 0))
        elif mode == "downsample2d":
            conv = Conv2d(w, f"{name}.resample.1", dim, dim, 3, stride=(2, 2))
            self.resample = lambda x: conv(F_pad(x, (0, 1, 0, 1)))  # nn.ZeroPad2d((0, 1, 0, 1))
        elif mode == "downsample3d":
            conv = Conv2d(w, f"{name}.resample.1", dim, dim, 3, stride=(2, 2))
            self.resample = lambda x: conv(F_pad(x, (0, 1, 0, 1)))
            self.time_conv = WanCausalConv3d(w, f"{name}.time_conv", dim, dim, (3, 1, 1), stride=(2, 1, 1), padding=(0, 0, 0))
        else:
            self.resample = lambda x: x

    def __call__(self, x, feat_cache=None, feat_idx=[0]):
        b, c, t, h, w = x.shape
        if self.mode == "upsample3d":
            if feat_cache is not None:
                idx = feat_idx[0]
                if feat_cache[idx] is None:
                    feat_cache[idx] = "Rep"
                    feat_idx[0] += 1
                else:
                    cache_x = x[:, :, -CACHE_T:, :, :].copy()
                    if cache_x.shape[2] < 2 and feat_cache[idx] is not None and not is_rep(feat_cache[idx]):
                        cache_x = np.concatenate([feat_cache[idx][:, :, -1, :, :][:, :, None], cache_x], axis=2)
                    if cache_x.shape[2] < 2 and feat_cache[idx] is not None and is_rep(feat_cache[idx]):
                        cache_x = np.concatenate([np.zeros_like(cache_x), cache_x], axis=2)
                    if is_rep(feat_cache[idx]):
                        x = self.time_conv(x)
                    else:
                        x = self.time_conv(x, feat_cache[idx])
                    feat_cache[idx] = cache_x
                    feat_idx[0] += 1

                    x = x.reshape(b, 2, c, t, h, w)
                    x = np.stack((x[:, 0, :, :, :, :], x[:, 1, :, :, :, :]), 3)
                    x = x.reshape(b, c, t * 2, h, w)
        t = x.shape[2]
        x = x.transpose(0, 2, 1, 3, 4).reshape(b * t, c, h, w)
        x = self.resample(x)
        x = x.reshape(b, t, x.shape[1], x.shape[2], x.shape[3]).transpose(0, 2, 1, 3, 4)

        if self.mode == "downsample3d":
            if feat_cache is not None:
                idx = feat_idx[0]
                if feat_cache[idx] is None:
                    feat_cache[idx] = x.copy()
                    feat_idx[0] += 1
                else:
                    cache_x = x[:, :, -1:, :, :].copy()
                    x = self.time_conv(np.concatenate([feat_cache[idx][:, :, -1:, :, :], x], 2))
                    feat_cache[idx] = cache_x
                    feat_idx[0] += 1
        return x


def cached_conv(conv, x, feat_cache, feat_idx):
    """The cache_x / conv / feat_cache[idx] = cache_x block repeated verbatim in diffusers' residual block,
    encoder and decoder heads."""
    if feat_cache is not None:
        idx = feat_idx[0]
        cache_x = x[:, :, -CACHE_T:, :, :].copy()
        if cache_x.shape[2] < 2 and feat_cache[idx] is not None:
            cache_x = np.concatenate([feat_cache[idx][:, :, -1, :, :][:, :, None], cache_x], axis=2)
        x = conv(x, feat_cache[idx])
        feat_cache[idx] = cache_x
        feat_idx[0] += 1
        return x
    return conv(x)


class WanResidualBlock:
    def __init__(self, w, name, in_dim, out_dim):
        self.norm1 = WanRMS_norm(w, f"{name}.norm1", in_dim, images=False)
        self.conv1 = WanCausalConv3d(w, f"{name}.conv1", in_dim, out_dim, 3, padding=1)
        self.norm2 = WanRMS_norm(w, f"{name}.norm2", out_dim, images=False)
        self.conv2 = WanCausalConv3d(w, f"{name}.conv2", out_dim, out_dim, 3, padding=1)
        self.conv_shortcut = WanCausalConv3d(w, f"{name}.conv_shortcut", in_dim, out_dim, 1) if in_dim != out_dim else (lambda x: x)

    def __call__(self, x, feat_cache=None, feat_idx=[0]):
        h = self.conv_shortcut(x)
        x = silu(self.norm1(x))
        x = cached_conv(self.conv1, x, feat_cache, feat_idx)
        x = silu(self.norm2(x))
        x = cached_conv(self.conv2, x, feat_cache, feat_idx)
        return x + h


class WanAttentionBlock:
    def __init__(self, w, name, dim):
        self.dim = dim
        self.norm = WanRMS_norm(w, f"{name}.norm", dim)
        self.to_qkv = Conv2d(w, f"{name}.to_qkv", dim, dim * 3, 1)
        self.proj = Conv2d(w, f"{name}.proj", dim, dim, 1)

    def __call__(self, x, *_):
        identity = x
        batch_size, channels, time, height, width = x.shape
        x = x.transpose(0, 2, 1, 3, 4).reshape(batch_size * time, channels, height, width)
        x = self.norm(x)
        qkv = self.to_qkv(x)
        qkv = qkv.reshape(batch_size * time, 1, channels * 3, -1)
        qkv = np.ascontiguousarray(qkv.transpose(0, 1, 3, 2))
        q, k, v = np.split(qkv, 3, axis=-1)
        x = sdpa(q, k, v)
        x = x.squeeze(1).transpose(0, 2, 1).reshape(batch_size * time, channels, height, width)
        x = self.proj(x)
        x = x.reshape(batch_size, time, channels, height, width)
        x = x.transpose(0, 2, 1, 3, 4)
        return x + identity


class WanMidBlock:
    def __init__(self, w, name, dim, num_layers=1):
        self.resnets = [WanResidualBlock(w, f"{name}.resnets.0", dim, dim)]
        self.attentions = []
        for i in range(num_layers):
            self.attentions.append(WanAttentionBlock(w, f"{name}.attentions.{i}", dim))
            self.resnets.append(WanResidualBlock(w, f"{name}.resnets.{i + 1}", dim, dim))

    def __call__(self, x, feat_cache=None, feat_idx=[0]):
        x = self.resnets[0](x, feat_cache, feat_idx)
        for attn, resnet in zip(self.attentions, self.resnets[1:]):
            if attn is not None:
                x = attn(x)
            x = resnet(x, feat_cache, feat_idx)
        return x


class WanResidualDownBlock:
    def __init__(self, w, name, in_dim, out_dim, num_res_blocks, temperal_downsample=False, down_flag=False):
        self.avg_shortcut = AvgDown3D(in_dim, out_dim, factor_t=2 if temperal_downsample else 1, factor_s=2 if down_flag else 1)
        self.resnets = []
        for r in range(num_res_blocks):
            self.resnets.append(WanResidualBlock(w, f"{name}.resnets.{r}", in_dim, out_dim))
            in_dim = out_dim
        if down_flag:
            mode = "downsample3d" if temperal_downsample else "downsample2d"
            self.downsampler = WanResample(w, f"{name}.downsampler", out_dim, mode=mode)
        else:
            self.downsampler = None

    def __call__(self, x, feat_cache=None, feat_idx=[0]):
        x_copy = x.copy()
        for resnet in self.resnets:
            x = resnet(x, feat_cache, feat_idx)
        if self.downsampler is not None:
            x = self.downsampler(x, feat_cache, feat_idx)
        return x + self.avg_shortcut.forward(x_copy)


class WanEncoder3d:
    def __init__(self, w, in_channels, dim, z_dim, dim_mult, num_res_blocks, attn_scales, temperal_downsample, is_residual):
        dims = [dim * u for u in [1] + dim_mult]
        scale = 1.0
        self.conv_in = WanCausalConv3d(w, "encoder.conv_in", in_channels, dims[0], 3, padding=1)
        self.down_blocks = []
        n = lambda: f"encoder.down_blocks.{len(self.down_blocks)}"
        for i, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:])):
            if is_residual:
                self.down_blocks.append(
                    WanResidualDownBlock(
                        w,
                        n(),
                        in_dim,
                        out_dim,
                        num_res_blocks,
                        temperal_downsample=temperal_downsample[i] if i != len(dim_mult) - 1 else False,
                        down_flag=i != len(dim_mult) - 1,
                    )
                )
            else:
                for _ in range(num_res_blocks):
                    self.down_blocks.append(WanResidualBlock(w, n(), in_dim, out_dim))
                    if scale in attn_scales:
                        self.down_blocks.append(WanAttentionBlock(w, n(), out_dim))
                    in_dim = out_dim
                if i != len(dim_mult) - 1:
                    mode = "downsample3d" if temperal_downsample[i] else "downsample2d"
                    self.down_blocks.append(WanResample(w, n(), out_dim, mode=mode))
                    scale /= 2.0
        self.mid_block = WanMidBlock(w, "encoder.mid_block", out_dim, num_layers=1)
        self.norm_out = WanRMS_norm(w, "encoder.norm_out", out_dim, images=False)
        self.conv_out = WanCausalConv3d(w, "encoder.conv_out", out_dim, z_dim, 3, padding=1)

    def __call__(self, x, feat_cache=None, feat_idx=[0]):
        x = cached_conv(self.conv_in, x, feat_cache, feat_idx)
        for layer in self.down_blocks:
            if feat_cache is not None:
                x = layer(x, feat_cache, feat_idx)
            else:
                x = layer(x)
        x = self.mid_block(x, feat_cache, feat_idx)
        x = silu(self.norm_out(x))
        return cached_conv(self.conv_out, x, feat_cache, feat_idx)


class WanResidualUpBlock:
    def __init__(self, w, name, in_dim, out_dim, num_res_blocks, temperal_upsample=False, up_flag=False):
        self.avg_shortcut = DupUp3D(in_dim, out_dim, factor_t=2 if temperal_upsample else 1, factor_s=2) if up_flag else None
        self.resnets = []
        current_dim = in_dim
        for r in range(num_res_blocks + 1):
            self.resnets.append(WanResidualBlock(w, f"{name}.resnets.{r}", current_dim, out_dim))
            current_dim = out_dim
        if up_flag:
            upsample_mode = "upsample3d" if temperal_upsample else "upsample2d"
            self.upsampler = WanResample(w, f"{name}.upsampler", out_dim, mode=upsample_mode, upsample_out_dim=out_dim)
        else:
            self.upsampler = None

    def __call__(self, x, feat_cache=None, feat_idx=[0], first_chunk=False):
        x_copy = x.copy()
        for resnet in self.resnets:
            x = resnet(x, feat_cache, feat_idx) if feat_cache is not None else resnet(x)
        if self.upsampler is not None:
            x = self.upsampler(x, feat_cache, feat_idx) if feat_cache is not None else self.upsampler(x)
        if self.avg_shortcut is not None:
            x = x + self.avg_shortcut.forward(x_copy, first_chunk=first_chunk)
        return x


class WanUpBlock:
    def __init__(self, w, name, in_dim, out_dim, num_res_blocks, upsample_mode=None):
        self.resnets = []
        current_dim = in_dim
        for r in range(num_res_blocks + 1):
            self.resnets.append(WanResidualBlock(w, f"{name}.resnets.{r}", current_dim, out_dim))
            current_dim = out_dim
        self.upsamplers = None
        if upsample_mode is not None:
            self.upsamplers = [WanResample(w, f"{name}.upsamplers.0", out_dim, mode=upsample_mode)]

    def __call__(self, x, feat_cache=None, feat_idx=[0], first_chunk=None):
        for resnet in self.resnets:
            x = resnet(x, feat_cache, feat_idx) if feat_cache is not None else resnet(x)
        if self.upsamplers is not None:
            x = self.upsamplers[0](x, feat_cache, feat_idx) if feat_cache is not None else self.upsamplers[0](x)
        return x


class WanDecoder3d:
    def __init__(self, w, dim, z_dim, dim_mult, num_res_blocks, attn_scales, temperal_upsample, out_channels, is_residual):
        dims = [dim * u for u in [dim_mult[-1]] + dim_mult[::-1]]
        self.conv_in = WanCausalConv3d(w, "decoder.conv_in", z_dim, dims[0], 3, padding=1)
        self.mid_block = WanMidBlock(w, "decoder.mid_block", dims[0], num_layers=1)
        self.up_blocks = []
        for i, (in_dim, out_dim) in enumerate(zip(dims[:-1], dims[1:])):
            if i > 0 and not is_residual:
                in_dim = in_dim // 2
            up_flag = i != len(dim_mult) - 1
            upsample_mode = None
            if up_flag and temperal_upsample[i]:
                upsample_mode = "upsample3d"
            elif up_flag:
                upsample_mode = "upsample2d"
            name = f"decoder.up_blocks.{i}"
            if is_residual:
                up_block = WanResidualUpBlock(
                    w, name, in_dim, out_dim, num_res_blocks, temperal_upsample=temperal_upsample[i] if up_flag else False, up_flag=up_flag
                )
            else:
                up_block = WanUpBlock(w, name, in_dim, out_dim, num_res_blocks, upsample_mode=upsample_mode)
            self.up_blocks.append(up_block)
        self.norm_out = WanRMS_norm(w, "decoder.norm_out", out_dim, images=False)
        self.conv_out = WanCausalConv3d(w, "decoder.conv_out", out_dim, out_channels, 3, padding=1)

    def __call__(self, x, feat_cache=None, feat_idx=[0], first_chunk=False):
        x = cached_conv(self.conv_in, x, feat_cache, feat_idx)
        x = self.mid_block(x, feat_cache, feat_idx)
        for up_block in self.up_blocks:
            x = up_block(x, feat_cache, feat_idx, first_chunk=first_chunk)
        x = silu(self.norm_out(x))
        return cached_conv(self.conv_out, x, feat_cache, feat_idx)


def patchify(x, patch_size):
    if patch_size == 1:
        return x
    batch_size, channels, frames, height, width = x.shape
    assert height % patch_size == 0 and width % patch_size == 0
    x = x.reshape(batch_size, channels, frames, height // patch_size, patch_size, width // patch_size, patch_size)
    x = np.ascontiguousarray(x.transpose(0, 1, 6, 4, 2, 3, 5))
    return x.reshape(batch_size, channels * patch_size * patch_size, frames, height // patch_size, width // patch_size)


def unpatchify(x, patch_size):
    if patch_size == 1:
        return x
    batch_size, c_patches, frames, height, width = x.shape
    channels = c_patches // (patch_size * patch_size)
    x = x.reshape(batch_size, channels, patch_size, patch_size, frames, height, width)
    x = np.ascontiguousarray(x.transpose(0, 1, 4, 5, 3, 6, 2))
    return x.reshape(batch_size, channels, frames, height * patch_size, width * patch_size)


def _count_convs(module):
    """sum(isinstance(m, WanCausalConv3d) for m in module.modules())."""
    seen = set()
    count = 0
    stack = [module]
    while stack:
        m = stack.pop()
        if id(m) in seen:
            continue
        seen.add(id(m))
        if isinstance(m, WanCausalConv3d):
            count += 1
        children = []
        for v in vars(m).values() if hasattr(m, "__dict__") else []:
            if isinstance(v, list):
                children.extend(v)
            else:
                children.append(v)
        stack.extend(c for c in children if type(c).__module__ == __name__)
    return count


class AutoencoderKLWan:
    def __init__(self, tensors, config):
        self.w = Weights(tensors)
        w = self.w
        c = config
        base_dim = c.get("base_dim", 96)
        decoder_base_dim = c.get("decoder_base_dim") or base_dim
        z_dim = c.get("z_dim", 16)
        dim_mult = c.get("dim_mult", [1, 2, 4, 4])
        num_res_blocks = c.get("num_res_blocks", 2)
        attn_scales = c.get("attn_scales", [])
        temperal_downsample = c.get("temperal_downsample", [False, True, True])
        is_residual = c.get("is_residual", False)
        self.patch_size = c.get("patch_size")
        self.z_dim = z_dim
        self.temperal_upsample = temperal_downsample[::-1]
        # diffusers multiplies in/out_channels by patch_size^2; the hub's Wan2.2 config already counts the folded
        # channels, so take the real counts from the weights (as the brief and our loader do).
        encoder_in_channels = tensors["encoder.conv_in.weight"].shape[1]
        decoder_out_channels = tensors["decoder.conv_out.weight"].shape[0]
        self.encoder = WanEncoder3d(w, encoder_in_channels, base_dim, z_dim * 2, dim_mult, num_res_blocks, attn_scales, temperal_downsample, is_residual)
        self.quant_conv = WanCausalConv3d(w, "quant_conv", z_dim * 2, z_dim * 2, 1)
        self.post_quant_conv = WanCausalConv3d(w, "post_quant_conv", z_dim, z_dim, 1)
        self.decoder = WanDecoder3d(w, decoder_base_dim, z_dim, dim_mult, num_res_blocks, attn_scales, self.temperal_upsample, decoder_out_channels, is_residual)
        unused = set(tensors) - w.used
        assert not unused, f"unused tensors: {sorted(unused)}"
        # AutoencoderKLWan takes the ratio from its config (16 for Wan2.2, #12335); AutoencoderKLQwenImage computes it.
        self.qwen_image = c.get("_class_name") == "AutoencoderKLQwenImage"
        self.spatial_compression_ratio = 2 ** len(temperal_downsample) if self.qwen_image else c.get("scale_factor_spatial", 8)
        self.use_tiling = False
        self.tile_sample_min_height = 256
        self.tile_sample_min_width = 256
        self.tile_sample_stride_height = 192
        self.tile_sample_stride_width = 192
        self._cached_conv_counts = {"decoder": _count_convs(self.decoder), "encoder": _count_convs(self.encoder)}

    def enable_tiling(self, tile_sample_min_height=None, tile_sample_min_width=None, tile_sample_stride_height=None, tile_sample_stride_width=None):
        self.use_tiling = True
        self.tile_sample_min_height = tile_sample_min_height or self.tile_sample_min_height
        self.tile_sample_min_width = tile_sample_min_width or self.tile_sample_min_width
        self.tile_sample_stride_height = tile_sample_stride_height or self.tile_sample_stride_height
        self.tile_sample_stride_width = tile_sample_stride_width or self.tile_sample_stride_width

    def disable_tiling(self):
        self.use_tiling = False

    def clear_cache(self):
        self._conv_num = self._cached_conv_counts["decoder"]
        self._conv_idx = [0]
        self._feat_map = [None] * self._conv_num
        self._enc_conv_num = self._cached_conv_counts["encoder"]
        self._enc_conv_idx = [0]
        self._enc_feat_map = [None] * self._enc_conv_num

    def _encode(self, x):
        _, _, num_frame, height, width = x.shape
        self.clear_cache()
        if self.patch_size is not None:
            x = patchify(x, patch_size=self.patch_size)
        # height and width are the image's (taken before patchify), compared with tile_sample_min as diffusers does.
        if self.use_tiling and (width > self.tile_sample_min_width or height > self.tile_sample_min_height):
            return self.tiled_encode(x)
        iter_ = 1 + (num_frame - 1) // 4
        for i in range(iter_):
            self._enc_conv_idx = [0]
            if i == 0:
                out = self.encoder(x[:, :, :1, :, :], feat_cache=self._enc_feat_map, feat_idx=self._enc_conv_idx)
            else:
                out_ = self.encoder(x[:, :, 1 + 4 * (i - 1) : 1 + 4 * i, :, :], feat_cache=self._enc_feat_map, feat_idx=self._enc_conv_idx)
                out = np.concatenate([out, out_], 2)
        enc = self.quant_conv(out)
        self.clear_cache()
        return enc

    def encode_mean(self, x):
        """encode(x).latent_dist.mean: DiagonalGaussianDistribution chunks the moments in two along dim 1."""
        h = self._encode(x)
        return h[:, : h.shape[1] // 2]

    def _decode(self, z):
        _, _, num_frame, height, width = z.shape
        tile_latent_min_height = self.tile_sample_min_height // self.spatial_compression_ratio
        tile_latent_min_width = self.tile_sample_min_width // self.spatial_compression_ratio
        if self.use_tiling and (width > tile_latent_min_width or height > tile_latent_min_height):
            return self.tiled_decode(z)
        self.clear_cache()
        x = self.post_quant_conv(z)
        for i in range(num_frame):
            self._conv_idx = [0]
            if i == 0:
                out = self.decoder(x[:, :, i : i + 1, :, :], feat_cache=self._feat_map, feat_idx=self._conv_idx, first_chunk=True)
            else:
                out_ = self.decoder(x[:, :, i : i + 1, :, :], feat_cache=self._feat_map, feat_idx=self._conv_idx)
                out = np.concatenate([out, out_], 2)
        if self.patch_size is not None:
            out = unpatchify(out, patch_size=self.patch_size)
        out = np.clip(out, -1.0, 1.0)
        self.clear_cache()
        return out

    decode = _decode

    def blend_v(self, a, b, blend_extent):
        blend_extent = min(a.shape[-2], b.shape[-2], blend_extent)
        for y in range(blend_extent):
            b[:, :, :, y, :] = a[:, :, :, -blend_extent + y, :] * (1 - y / blend_extent) + b[:, :, :, y, :] * (y / blend_extent)
        return b

    def blend_h(self, a, b, blend_extent):
        blend_extent = min(a.shape[-1], b.shape[-1], blend_extent)
        for x in range(blend_extent):
            b[:, :, :, :, x] = a[:, :, :, :, -blend_extent + x] * (1 - x / blend_extent) + b[:, :, :, :, x] * (x / blend_extent)
        return b

    def tiled_encode(self, x):
        _, _, num_frames, height, width = x.shape
        encode_spatial_compression_ratio = self.spatial_compression_ratio
        if self.patch_size is not None:
            assert encode_spatial_compression_ratio % self.patch_size == 0
            encode_spatial_compression_ratio = self.spatial_compression_ratio // self.patch_size

        latent_height = height // encode_spatial_compression_ratio
        latent_width = width // encode_spatial_compression_ratio

        tile_latent_min_height = self.tile_sample_min_height // encode_spatial_compression_ratio
        tile_latent_min_width = self.tile_sample_min_width // encode_spatial_compression_ratio
        tile_latent_stride_height = self.tile_sample_stride_height // encode_spatial_compression_ratio
        tile_latent_stride_width = self.tile_sample_stride_width // encode_spatial_compression_ratio

        blend_height = tile_latent_min_height - tile_latent_stride_height
        blend_width = tile_latent_min_width - tile_latent_stride_width

        rows = []
        for i in range(0, height, self.tile_sample_stride_height):
            row = []
            for j in range(0, width, self.tile_sample_stride_width):
                self.clear_cache()
                time = []
                frame_range = 1 + (num_frames - 1) // 4
                for k in range(frame_range):
                    self._enc_conv_idx = [0]
                    if k == 0:
                        tile = x[:, :, :1, i : i + self.tile_sample_min_height, j : j + self.tile_sample_min_width]
                    else:
                        tile = x[:, :, 1 + 4 * (k - 1) : 1 + 4 * k, i : i + self.tile_sample_min_height, j : j + self.tile_sample_min_width]
                    tile = self.encoder(tile, feat_cache=self._enc_feat_map, feat_idx=self._enc_conv_idx)
                    tile = self.quant_conv(tile)
                    time.append(tile)
                row.append(np.concatenate(time, axis=2))
            rows.append(row)
        self.clear_cache()

        result_rows = []
        for i, row in enumerate(rows):
            result_row = []
            for j, tile in enumerate(row):
                if i > 0:
                    tile = self.blend_v(rows[i - 1][j], tile, blend_height)
                if j > 0:
                    tile = self.blend_h(row[j - 1], tile, blend_width)
                result_row.append(tile[:, :, :, :tile_latent_stride_height, :tile_latent_stride_width])
            result_rows.append(np.concatenate(result_row, axis=-1))

        enc = np.concatenate(result_rows, axis=3)[:, :, :, :latent_height, :latent_width]
        return enc

    def tiled_decode(self, z):
        _, _, num_frames, height, width = z.shape
        sample_height = height * self.spatial_compression_ratio
        sample_width = width * self.spatial_compression_ratio

        tile_latent_min_height = self.tile_sample_min_height // self.spatial_compression_ratio
        tile_latent_min_width = self.tile_sample_min_width // self.spatial_compression_ratio
        tile_latent_stride_height = self.tile_sample_stride_height // self.spatial_compression_ratio
        tile_latent_stride_width = self.tile_sample_stride_width // self.spatial_compression_ratio
        tile_sample_stride_height = self.tile_sample_stride_height
        tile_sample_stride_width = self.tile_sample_stride_width
        if self.patch_size is not None:
            sample_height = sample_height // self.patch_size
            sample_width = sample_width // self.patch_size
            tile_sample_stride_height = tile_sample_stride_height // self.patch_size
            tile_sample_stride_width = tile_sample_stride_width // self.patch_size
            blend_height = self.tile_sample_min_height // self.patch_size - tile_sample_stride_height
            blend_width = self.tile_sample_min_width // self.patch_size - tile_sample_stride_width
        else:
            blend_height = self.tile_sample_min_height - tile_sample_stride_height
            blend_width = self.tile_sample_min_width - tile_sample_stride_width

        rows = []
        for i in range(0, height, tile_latent_stride_height):
            row = []
            for j in range(0, width, tile_latent_stride_width):
                self.clear_cache()
                time = []
                for k in range(num_frames):
                    self._conv_idx = [0]
                    tile = z[:, :, k : k + 1, i : i + tile_latent_min_height, j : j + tile_latent_min_width]
                    tile = self.post_quant_conv(tile)
                    decoded = self.decoder(tile, feat_cache=self._feat_map, feat_idx=self._conv_idx, first_chunk=(k == 0))
                    time.append(decoded)
                row.append(np.concatenate(time, axis=2))
            rows.append(row)
        self.clear_cache()

        result_rows = []
        for i, row in enumerate(rows):
            result_row = []
            for j, tile in enumerate(row):
                if i > 0:
                    tile = self.blend_v(rows[i - 1][j], tile, blend_height)
                if j > 0:
                    tile = self.blend_h(row[j - 1], tile, blend_width)
                result_row.append(tile[:, :, :, :tile_sample_stride_height, :tile_sample_stride_width])
            result_rows.append(np.concatenate(result_row, axis=-1))
        dec = np.concatenate(result_rows, axis=3)[:, :, :, :sample_height, :sample_width]

        if self.patch_size is not None:
            dec = unpatchify(dec, patch_size=self.patch_size)
        # AutoencoderKLQwenImage.tiled_decode returns the blend unclamped (its untiled _decode clamps).
        return dec if self.qwen_image else np.clip(dec, -1.0, 1.0)


# ---------------------------------------------------------------------------------------------------------------


def run_preset(src, out_path):
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    tensors = read_safetensors(os.path.join(src, "diffusion_pytorch_model.safetensors"))
    inputs = read_safetensors(os.path.join(src, "inputs.safetensors"))
    vae = AutoencoderKLWan(tensors, config)
    print(f"  convs: encoder {vae._cached_conv_counts['encoder']}, decoder {vae._cached_conv_counts['decoder']}")
    outputs = [(name, inputs[name]) for name in inputs]

    z = inputs["latents"]
    dec = vae.decode(z)
    print(f"  decode {z.shape} -> {dec.shape}, range [{dec.min():.3f}, {dec.max():.3f}], clamped {np.mean(np.abs(dec) == 1):.3f}")
    outputs.append(("decoded", dec))

    def tiling(name):
        # enable_tiling(tile_sample_min_height, tile_sample_min_width, tile_sample_stride_height, tile_sample_stride_width),
        # in diffusers' units (image pixels), as make-inputs.ts chose them for the preset.
        h, w, sh, sw = (int(v) for v in inputs[name])
        vae.enable_tiling(tile_sample_min_height=h, tile_sample_min_width=w, tile_sample_stride_height=sh, tile_sample_stride_width=sw)
        return (h, w, sh, sw)

    tiled_in = inputs["tiled_latents"]
    for tiling_name, out_name in (("tiling_decode", "tiled_decoded"), ("tiling_decode_hw", "tiled_decoded_hw")):
        t = tiling(tiling_name)
        tiled = vae.decode(tiled_in)
        vae.disable_tiling()
        untiled = vae.decode(tiled_in)
        print(f"  tiled decode {t} {tiled_in.shape} -> {tiled.shape}, max |tiled - untiled| {np.abs(tiled - untiled).max():.3f}")
        outputs.append((out_name, tiled))

    x = inputs["video"]
    mean = vae.encode_mean(x)
    print(f"  encode {x.shape} -> {mean.shape}, std {mean.std():.3f}")
    outputs.append(("encoded_mean", mean))

    xt = inputs["tiled_video"]
    t = tiling("tiling_encode")
    tiled_mean = vae.encode_mean(xt)
    vae.disable_tiling()
    untiled_mean = vae.encode_mean(xt)
    print(f"  tiled encode {t} {xt.shape} -> {tiled_mean.shape}, max |tiled - untiled| {np.abs(tiled_mean - untiled_mean).max():.3f}")
    outputs.append(("tiled_encoded_mean", tiled_mean))

    write_safetensors(out_path, outputs)
    print(f"  wrote {out_path} ({os.path.getsize(out_path)} bytes)")


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(tempfile.gettempdir(), "wan-vae-fixture")
    out_dir = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "test", "fixtures", "wan-vae")
    os.makedirs(out_dir, exist_ok=True)
    for preset in sorted(os.listdir(root)):
        src = os.path.join(root, preset)
        if not os.path.isfile(os.path.join(src, "inputs.safetensors")):
            continue
        print(preset)
        run_preset(src, os.path.join(out_dir, f"{preset}.safetensors"))


if __name__ == "__main__":
    main()
