"""A float64 numpy reference of the audio front ends tensorgpu ports, used as an independent golden reference for
src/audio/: the built-in synthetic test signal, librosa's mel filter bank, openai-whisper's log-mel spectrogram and
torchaudio's sinc resampler.

Ported from (read at these commits; the math is re-implemented here, not copied):
  src/audio/synthetic.ts (this repository) -- syntheticSignal: float64 formula rounded once to float32, the 32-bit
    Numerical Recipes LCG done in integer arithmetic.
  librosa/librosa @ b7e7bf486353821311f68d756e487f65d09cf319
    librosa/filters.py: mel(); librosa/core/convert.py: hz_to_mel, mel_to_hz, mel_frequencies, fft_frequencies.
  openai/whisper @ c0d2f624c09dc18e709e37c2ad90c039a4eb72a2
    whisper/audio.py: N_FFT/HOP_LENGTH/SAMPLE_RATE, mel_filters() (its docstring: mel_filters.npz was saved from
    librosa.filters.mel(sr=16000, n_fft=400, n_mels=80|128)), log_mel_spectrogram(); torch.stft's defaults
    (center=True, pad_mode='reflect', onesided, unnormalized) and torch.hann_window's periodic default.
  pytorch/audio @ b29b6ad97020c7ac98fdcad7c4d83492996322d0
    src/torchaudio/functional/functional.py: resample(), _get_sinc_resample_kernel(), _apply_sinc_resample_kernel()
    with the defaults lowpass_filter_width=6, rolloff=0.99, resampling_method='sinc_interp_hann'.

Precision: every computation is float64. Upstream differs in these known, tiny ways: librosa builds the filter bank in
its dtype argument (float32 by default, which is what whisper's .npz holds); whisper runs the STFT, the mel product and
the log in float32; torchaudio builds the kernel in the waveform's dtype (float32 for float32 audio; this port matches
its float64-waveform path). The audio itself stays exactly the float32 samples of the test signal.

Usage:
  python3 tools/audio-reference/audio_reference.py [outDir]
    outDir (default test/fixtures/audio) receives:
      whisper-logmel-80.safetensors   logmel F32 [80, 3000] of synthetic_signal(30); audio_probe F32 [480] = audio[::1000]
      whisper-logmel-128.safetensors  logmel F32 [128, 400] of synthetic_signal(4);  audio_probe F32 [64]
      mel-filters.safetensors         slaney_80 [80, 201], slaney_128 [128, 201] (sr 16000, n_fft 400),
                                      htk_none_40 [40, 513] (sr 22050, n_fft 1024, fmin 20, fmax 8000, htk, norm None),
                                      slaney_64_default_fmax [64, 257] (sr 22050, n_fft 512, fmax None)
      resample.safetensors            per case r44100_16000, r48000_16000, r16000_22050, r16000_8000:
                                      <case>_input, <case>_output, <case>_kernel [min(new_reduced, 8), kernel_len] (its first phases);
                                      __metadata__ holds <case>_orig_freq, _new_freq, _gcd, _width (strings)
    and a one-line summary (shape, min, max) per tensor is printed.
  python3 tools/audio-reference/audio_reference.py --self-test
    direct O(n^2) DFT vs rfft on a few frames, librosa mel-scale identities, resampler checks (identity at equal
    rates, conv vs a direct per-output sinc sum), LCG/formula checks of the test signal.
"""

import json
import math
import os
import struct
import sys

import numpy as np

LIBROSA_COMMIT = "b7e7bf486353821311f68d756e487f65d09cf319"
WHISPER_COMMIT = "c0d2f624c09dc18e709e37c2ad90c039a4eb72a2"
TORCHAUDIO_COMMIT = "b29b6ad97020c7ac98fdcad7c4d83492996322d0"

# whisper/audio.py hard-coded hyperparameters
SAMPLE_RATE = 16000
N_FFT = 400
HOP_LENGTH = 160

# ---------------------------------------------------------------------------------------------------------------
# safetensors


def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, array); all stored F32 little-endian. Header JSON padded with spaces to 8 bytes."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    at = 0
    for name, arr in tensors:
        a = np.asarray(arr)
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{path}: tensor '{name}' has non-finite values")
        b = np.ascontiguousarray(a, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": [int(d) for d in a.shape], "data_offsets": [at, at + len(b)]}
        at += len(b)
        blobs.append(b)
    js = json.dumps(header, separators=(",", ":")).encode("utf-8")
    js += b" " * ((8 - len(js) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(js)))
        f.write(js)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n].decode("utf-8"))
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        lo, hi = e["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + lo : 8 + n + hi], dtype="<f4").reshape(e["shape"])
    return out, header.get("__metadata__", {})


# ---------------------------------------------------------------------------------------------------------------
# 1. the synthetic test signal (src/audio/synthetic.ts)


def _js_round(x):
    """Math.round: round half up (toward +inf), unlike Python's round-half-even."""
    return int(math.floor(x + 0.5))


def synthetic_signal(seconds, sample_rate=16000):
    """float32 array of syntheticSignal(seconds, sampleRate). A scalar loop with math.sin so each sample follows the
    TypeScript expression's evaluation order exactly (numpy's vectorized sin may be a few ulp off libm)."""
    n = _js_round(seconds * sample_rate)
    out = np.empty(n, dtype=np.float64)
    duration = n / sample_rate
    f0 = 100.0
    f1 = 7000.0
    sweep = (f1 - f0) / duration if duration > 0 else 0.0
    two_pi = 2 * math.pi
    third = (2 * duration) / 3
    state = 12345
    for i in range(n):
        t = i / sample_rate
        x = 0.4 * math.sin(two_pi * (f0 * t + 0.5 * sweep * t * t))
        x += 0.2 * math.sin(two_pi * 440 * t)
        if math.floor(t) % 2 == 0:
            x += 0.1 * math.sin(two_pi * 1000 * t)
        if t >= third:
            x += 0.15 * math.sin(two_pi * 3000 * t)
        # (Math.imul(state, 1664525) + 1013904223) >>> 0 == (1664525 * state + 1013904223) mod 2^32
        state = (state * 1664525 + 1013904223) & 0xFFFFFFFF
        x += 0.01 * ((state / 4294967296) * 2 - 1)
        out[i] = x
    return out.astype(np.float32)  # the single rounding (Float32Array store)


# ---------------------------------------------------------------------------------------------------------------
# 2. librosa mel filter bank


def hz_to_mel(frequencies, htk=False):
    f = np.asarray(frequencies, dtype=np.float64)
    if htk:
        return 2595.0 * np.log10(1.0 + f / 700.0)
    f_min = 0.0
    f_sp = 200.0 / 3
    mels = (f - f_min) / f_sp
    min_log_hz = 1000.0
    min_log_mel = (min_log_hz - f_min) / f_sp
    logstep = np.log(6.4) / 27.0
    # np.where evaluates the log everywhere; guard non-positive inputs of the unused branch.
    safe = np.where(f >= min_log_hz, f, min_log_hz)
    return np.where(f >= min_log_hz, min_log_mel + np.log(safe / min_log_hz) / logstep, mels)


def mel_to_hz(mels, htk=False):
    m = np.asarray(mels, dtype=np.float64)
    if htk:
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)
    f_min = 0.0
    f_sp = 200.0 / 3
    freqs = f_min + f_sp * m
    min_log_hz = 1000.0
    min_log_mel = (min_log_hz - f_min) / f_sp
    logstep = np.log(6.4) / 27.0
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), freqs)


def mel_frequencies(n_mels, fmin=0.0, fmax=11025.0, htk=False):
    """n_mels frequencies evenly spaced on the mel scale from fmin to fmax (both included)."""
    return mel_to_hz(np.linspace(hz_to_mel(fmin, htk=htk), hz_to_mel(fmax, htk=htk), n_mels), htk=htk)


def fft_frequencies(sr, n_fft):
    """np.fft.rfftfreq(n_fft, 1/sr): k * sr / n_fft for k = 0 .. n_fft // 2."""
    return np.fft.rfftfreq(n=n_fft, d=1.0 / sr)


def mel_filters(sr, n_fft, n_mels=128, fmin=0.0, fmax=None, htk=False, norm="slaney"):
    """librosa.filters.mel in float64: [n_mels, 1 + n_fft // 2]."""
    if fmax is None:
        fmax = float(sr) / 2
    if norm not in ("slaney", None):
        raise ValueError(f"norm={norm!r} is not ported (only 'slaney' and None)")
    fftfreqs = fft_frequencies(sr, n_fft)
    mel_f = mel_frequencies(n_mels + 2, fmin=fmin, fmax=fmax, htk=htk)
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fftfreqs[None, :]  # np.subtract.outer
    weights = np.zeros((n_mels, len(fftfreqs)), dtype=np.float64)
    for i in range(n_mels):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0, np.minimum(lower, upper))
    if norm == "slaney":
        enorm = 2.0 / (mel_f[2 : n_mels + 2] - mel_f[:n_mels])
        weights *= enorm[:, None]
    return weights


# ---------------------------------------------------------------------------------------------------------------
# 3. whisper log-mel spectrogram


def hann_window_periodic(n):
    """torch.hann_window(n) (periodic=True): 0.5 - 0.5 cos(2 pi k / n), k = 0 .. n-1."""
    k = np.arange(n, dtype=np.float64)
    return 0.5 - 0.5 * np.cos(2.0 * np.pi * k / n)


def stft_frames(audio, n_fft=N_FFT, hop=HOP_LENGTH):
    """The windowed frames torch.stft(center=True, pad_mode='reflect') transforms: [n_frames, n_fft], float64."""
    x = np.asarray(audio, dtype=np.float64)
    pad = n_fft // 2
    if len(x) <= pad:
        raise ValueError(f"reflect padding needs more than {pad} samples, got {len(x)}")
    xp = np.pad(x, (pad, pad), mode="reflect")  # edge sample not repeated, as torch's reflect
    n_frames = 1 + (len(xp) - n_fft) // hop
    frames = np.lib.stride_tricks.sliding_window_view(xp, n_fft)[::hop][:n_frames]
    return frames * hann_window_periodic(n_fft)[None, :]


def stft_power(audio, n_fft=N_FFT, hop=HOP_LENGTH):
    """|STFT|^2 as [n_freq, n_frames] (onesided, unnormalized: X[k] = sum_n w[n] x[n] e^{-2 pi i k n / N})."""
    spec = np.fft.rfft(stft_frames(audio, n_fft, hop), axis=-1)
    return (spec.real**2 + spec.imag**2).T


def log_mel_spectrogram(audio, n_mels=80):
    """whisper.audio.log_mel_spectrogram(audio, n_mels) in float64, with librosa mel(sr=16000, n_fft=400, n_mels)."""
    magnitudes = stft_power(audio)[:, :-1]  # stft[..., :-1]: the last frame is dropped
    filters = mel_filters(SAMPLE_RATE, N_FFT, n_mels)
    mel_spec = filters @ magnitudes
    log_spec = np.log10(np.maximum(mel_spec, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return (log_spec + 4.0) / 4.0, mel_spec


# ---------------------------------------------------------------------------------------------------------------
# 4. torchaudio sinc resampler


def sinc_resample_kernel(orig_freq, new_freq, gcd, lowpass_filter_width=6, rolloff=0.99):
    """_get_sinc_resample_kernel for 'sinc_interp_hann' in float64. Returns (kernel [new, 2*width + orig], width) with
    orig/new the gcd-reduced rates; torchaudio's kernel is [new, 1, kernel_len] (the channel dim is squeezed here)."""
    if not (int(orig_freq) == orig_freq and int(new_freq) == new_freq):
        raise ValueError("frequencies must be integers")
    orig = int(orig_freq) // gcd
    new = int(new_freq) // gcd
    if lowpass_filter_width <= 0:
        raise ValueError("lowpass_filter_width must be positive")
    base_freq = min(orig, new) * rolloff
    width = math.ceil(lowpass_filter_width * orig / base_freq)
    idx = np.arange(-width, width + orig, dtype=np.float64)[None, :] / orig
    t = np.arange(0, -new, -1, dtype=np.float64)[:, None] / new + idx
    t = t * base_freq
    t = np.clip(t, -lowpass_filter_width, lowpass_filter_width)
    window = np.cos(t * math.pi / lowpass_filter_width / 2) ** 2
    t = t * math.pi
    scale = base_freq / orig
    with np.errstate(invalid="ignore", divide="ignore"):
        kernels = np.where(t == 0, 1.0, np.sin(t) / t)
    kernels = kernels * (window * scale)
    return kernels, width


def apply_sinc_resample_kernel(waveform, orig_freq, new_freq, gcd, kernel, width):
    """_apply_sinc_resample_kernel for one 1-D waveform: zero-pad (width, width + orig), conv1d with stride orig (a
    cross-correlation: out[j, k] = sum_m kernel[j, m] * padded[k * orig + m]), interleave the new phases
    (transpose + reshape: output k * new + j), trim to ceil(new * length / orig)."""
    orig = int(orig_freq) // gcd
    new = int(new_freq) // gcd
    x = np.asarray(waveform, dtype=np.float64)
    length = len(x)
    xp = np.pad(x, (width, width + orig))
    klen = kernel.shape[1]
    n_out = (len(xp) - klen) // orig + 1  # conv1d output length = length // orig + 1
    windows = np.lib.stride_tricks.sliding_window_view(xp, klen)[::orig][:n_out]
    resampled = (windows @ kernel.T).reshape(-1)  # [n_out, new] row-major == transpose(1, 2).reshape
    target_length = math.ceil(new * length / orig)  # float true division then ceil, as torch.ceil(as_tensor(...))
    return resampled[:target_length]


def resample(waveform, orig_freq, new_freq, lowpass_filter_width=6, rolloff=0.99):
    """torchaudio.functional.resample (sinc_interp_hann) in float64. Returns (output, kernel or None, width, gcd)."""
    if orig_freq <= 0 or new_freq <= 0:
        raise ValueError("frequencies must be positive")
    x = np.asarray(waveform, dtype=np.float64)
    if orig_freq == new_freq:
        return x, None, None, None  # torchaudio returns the input itself, before any kernel is built
    gcd = math.gcd(int(orig_freq), int(new_freq))
    kernel, width = sinc_resample_kernel(orig_freq, new_freq, gcd, lowpass_filter_width, rolloff)
    return apply_sinc_resample_kernel(x, orig_freq, new_freq, gcd, kernel, width), kernel, width, gcd


# ---------------------------------------------------------------------------------------------------------------
# fixtures


RESAMPLE_CASES = [("r44100_16000", 44100, 16000), ("r48000_16000", 48000, 16000),
                  ("r16000_22050", 16000, 22050), ("r16000_8000", 16000, 8000)]


def _summary(fname, name, a):
    a = np.asarray(a)
    print(f"{fname}: {name} {list(a.shape)} min {a.min():.6g} max {a.max():.6g}")


def _write(out_dir, fname, tensors, metadata=None):
    path = os.path.join(out_dir, fname)
    write_safetensors(path, tensors, metadata)
    for name, a in tensors:
        _summary(fname, name, a)
    print(f"  -> {path} ({os.path.getsize(path)} bytes)")


def build_fixtures(out_dir):
    os.makedirs(out_dir, exist_ok=True)

    for seconds, n_mels in ((30, 80), (4, 128)):
        audio = synthetic_signal(seconds)
        logmel, mel_spec = log_mel_spectrogram(audio, n_mels)
        max_log = np.log10(max(mel_spec.max(), 1e-10))
        if logmel.max() != (max_log + 4.0) / 4.0:
            raise AssertionError("logmel max is not (max_log + 4) / 4")
        print(f"whisper-logmel-{n_mels}: max_log10 {max_log:.9g}, floor {(max_log - 8 + 4) / 4:.9g}, "
              f"floored {np.mean(logmel == logmel.min()) * 100:.2f}% of cells")
        _write(out_dir, f"whisper-logmel-{n_mels}.safetensors",
               [("logmel", logmel), ("audio_probe", audio[::1000])],
               {"seconds": seconds, "n_mels": n_mels, "sample_rate": SAMPLE_RATE, "n_fft": N_FFT,
                "hop_length": HOP_LENGTH, "whisper_commit": WHISPER_COMMIT, "librosa_commit": LIBROSA_COMMIT})

    _write(out_dir, "mel-filters.safetensors", [
        ("slaney_80", mel_filters(16000, 400, 80, fmin=0.0, fmax=8000.0)),
        ("slaney_128", mel_filters(16000, 400, 128, fmin=0.0, fmax=8000.0)),
        ("htk_none_40", mel_filters(22050, 1024, 40, fmin=20.0, fmax=8000.0, htk=True, norm=None)),
        ("slaney_64_default_fmax", mel_filters(22050, 512, 64, fmax=None)),
    ], {"librosa_commit": LIBROSA_COMMIT,
        "slaney_80": "sr=16000 n_fft=400 n_mels=80 fmin=0 fmax=8000 htk=False norm=slaney",
        "slaney_128": "sr=16000 n_fft=400 n_mels=128 fmin=0 fmax=8000 htk=False norm=slaney",
        "htk_none_40": "sr=22050 n_fft=1024 n_mels=40 fmin=20 fmax=8000 htk=True norm=None",
        "slaney_64_default_fmax": "sr=22050 n_fft=512 n_mels=64 fmin=0 fmax=None(11025) htk=False norm=slaney"})

    tensors = []
    meta = {"torchaudio_commit": TORCHAUDIO_COMMIT, "lowpass_filter_width": 6, "rolloff": 0.99,
            "resampling_method": "sinc_interp_hann"}
    for case, orig, new in RESAMPLE_CASES:
        seconds = 0.1 if orig == 16000 else 0.25
        x = synthetic_signal(seconds, orig)
        y, kernel, width, gcd = resample(x, orig, new)
        # The first 8 phases of the filter bank (the whole bank of 441 phases would be 0.6 MB).
        tensors += [(f"{case}_input", x), (f"{case}_output", y), (f"{case}_kernel", kernel[:8])]
        meta.update({f"{case}_orig_freq": orig, f"{case}_new_freq": new, f"{case}_gcd": gcd,
                     f"{case}_width": width, f"{case}_input_seconds": seconds})
        print(f"{case}: gcd {gcd}, reduced {orig // gcd}->{new // gcd}, width {width}, "
              f"kernel {list(kernel.shape)}, {len(x)} -> {len(y)} samples")
    _write(out_dir, "resample.safetensors", tensors, meta)

    total = sum(os.path.getsize(os.path.join(out_dir, f)) for f in os.listdir(out_dir) if f.endswith(".safetensors"))
    print(f"total fixture size {total} bytes")


# ---------------------------------------------------------------------------------------------------------------
# self-test


def _check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        raise SystemExit(1)


def self_test():
    # --- test signal: LCG and the per-sample formula against an independent vectorized evaluation
    s = 12345
    states = []
    for _ in range(3):
        s = (s * 1664525 + 1013904223) % (1 << 32)
        states.append(s)
    _check(states[0] == (12345 * 1664525 + 1013904223) % 4294967296, f"LCG first states {states}")
    # imul semantics: signed 32-bit wrap of the product, then + c, then >>> 0
    prod = (s * 1664525) & 0xFFFFFFFF
    prod = prod - (1 << 32) if prod >= (1 << 31) else prod
    _check(((prod + 1013904223) % (1 << 32)) == (s * 1664525 + 1013904223) % (1 << 32), "Math.imul path == mod 2^32")
    sr = 16000
    a = synthetic_signal(3.0, sr)
    i = np.arange(len(a))
    t = i / sr
    dur = len(a) / sr
    sweep = 6900.0 / dur
    v = 0.4 * np.sin(2 * np.pi * (100.0 * t + 0.5 * sweep * t * t)) + 0.2 * np.sin(2 * np.pi * 440 * t)
    v += np.where(np.floor(t) % 2 == 0, 0.1 * np.sin(2 * np.pi * 1000 * t), 0.0)
    v += np.where(t >= 2 * dur / 3, 0.15 * np.sin(2 * np.pi * 3000 * t), 0.0)
    st = np.empty(len(a), dtype=np.float64)
    s = 12345
    for k in range(len(a)):
        s = (s * 1664525 + 1013904223) % (1 << 32)
        st[k] = s
    v += 0.01 * (st / 2**32 * 2 - 1)
    err = np.max(np.abs(v - a.astype(np.float64)))
    _check(err < 1e-7 and a.dtype == np.float32, f"signal vs vectorized formula, max |diff| {err:.3g} (< f32 ulp)")
    _check(len(synthetic_signal(0.25, 44100)) == 11025 and len(synthetic_signal(0.1, 16000)) == 1600, "lengths")

    # --- direct DFT of a few frames vs rfft
    audio = synthetic_signal(1.0)
    frames = stft_frames(audio)
    _check(frames.shape == (1 + len(audio) // HOP_LENGTH, N_FFT), f"frame count {frames.shape[0]} = 1 + len // hop")
    n = np.arange(N_FFT)
    worst = 0.0
    for f in (0, 1, 37, frames.shape[0] // 2, frames.shape[0] - 1):
        k = np.arange(N_FFT // 2 + 1)[:, None]
        ang = -2.0 * np.pi * ((k * n[None, :]) % N_FFT) / N_FFT  # exact integer phase reduction
        direct = (frames[f][None, :] * (np.cos(ang) + 1j * np.sin(ang))).sum(axis=1)
        fast = np.fft.rfft(frames[f])
        worst = max(worst, np.max(np.abs(direct - fast)) / np.max(np.abs(direct)))
    _check(worst < 1e-12, f"direct DFT vs rfft on 5 frames, max rel err {worst:.3g}")
    # reflect padding: frame 0 is centred on sample 0 with x[-j] = x[j]
    x64 = audio.astype(np.float64)
    w = hann_window_periodic(N_FFT)
    ref0 = np.array([x64[abs(j - 200)] for j in range(N_FFT)]) * w
    _check(np.array_equal(frames[0], ref0), "frame 0 = reflect-padded (edge not repeated) * hann")
    _check(abs(w[0]) == 0 and abs(w[200] - 1) < 1e-15 and np.allclose(w[1:], w[1:][::-1]), "periodic Hann window")

    # --- librosa identities
    _check(abs(hz_to_mel(1000.0) - 15.0) < 1e-12, "slaney hz_to_mel(1000) = 15")
    _check(abs(hz_to_mel(200.0) - 3.0) < 1e-12, "slaney hz_to_mel(200) = 3 (linear part)")
    _check(abs(hz_to_mel(6400.0) - 42.0) < 1e-12, "slaney hz_to_mel(6400) = 15 + 27")
    _check(abs(hz_to_mel(700.0, htk=True) - 2595.0 * np.log10(2.0)) < 1e-9, "htk hz_to_mel(700) = 2595 log10 2")
    fr = np.array([0.0, 50.0, 999.0, 1000.0, 1234.5, 8000.0, 11025.0])
    _check(np.allclose(mel_to_hz(hz_to_mel(fr)), fr, rtol=1e-13, atol=1e-10)
           and np.allclose(mel_to_hz(hz_to_mel(fr, htk=True), htk=True), fr, rtol=1e-13, atol=1e-10),
           "mel_to_hz(hz_to_mel(f)) = f (both scales)")
    mf = mel_frequencies(82, 0.0, 8000.0)
    _check(mf[0] == 0.0 and abs(mf[-1] - 8000.0) < 1e-9 and np.all(np.diff(mf) > 0), "mel_frequencies endpoints")
    fb = mel_filters(16000, 400, 80)
    _check(fb.shape == (80, 201) and np.all(fb >= 0) and np.all(fb.max(axis=1) > 0), "slaney_80 shape, no empty row")
    raw = mel_filters(16000, 400, 80, norm=None)
    enorm = 2.0 / (mf[2:] - mf[:-2])
    _check(np.allclose(fb, raw * enorm[:, None], rtol=1e-14, atol=0), "slaney norm = 2 / (f[i+2] - f[i])")
    _check(raw.max() <= 1.0 + 1e-12, "unnormalized triangles peak at most 1")

    # --- whisper log-mel invariants
    lm, ms = log_mel_spectrogram(synthetic_signal(2.0), 80)
    mx = np.log10(ms.max())
    _check(lm.shape == (80, 200), "logmel frames = len // hop (last dropped)")
    _check(lm.max() == (mx + 4) / 4 and lm.min() >= (mx - 8 + 4) / 4 - 1e-12,
           "logmel max = (max_log + 4) / 4, nothing below max - 2")

    # --- resampler
    x = synthetic_signal(0.1, 16000)
    y, kern, _, _ = resample(x, 16000, 16000)
    _check(kern is None and np.array_equal(y, x.astype(np.float64)), "resample 16k -> 16k is the identity")
    for orig, new in ((44100, 16000), (16000, 22050), (48000, 16000), (3, 2)):
        xin = synthetic_signal(0.05, orig) if orig > 100 else np.random.default_rng(0).standard_normal(50)
        yout, kern, width, g = resample(xin, orig, new)
        o, nn = orig // g, new // g
        lpw, base = 6, min(o, nn) * 0.99
        # direct: y[m] = sum_i x[i] * scale * sinc(pi tc) * cos(pi tc / 12)^2, tc = clamp((i/o - m/nn) * base, +-6),
        # over the kernel's support i in [k*o - width, k*o + width + o) for m = k*nn + j
        xx = np.asarray(xin, dtype=np.float64)
        direct = np.zeros(len(yout))
        for m in range(len(yout)):
            kk = m // nn
            for ii in range(kk * o - width, kk * o + width + o):
                if 0 <= ii < len(xx):
                    tc = min(max((ii / o - m / nn) * base, -lpw), lpw)
                    h = 1.0 if tc == 0 else math.sin(math.pi * tc) / (math.pi * tc)
                    direct[m] += xx[ii] * h * math.cos(math.pi * tc / lpw / 2) ** 2 * base / o
        err = np.max(np.abs(direct - yout))
        _check(len(yout) == math.ceil(nn * len(xx) / o) and err < 1e-12,
               f"resample {orig}->{new}: conv == direct sinc sum (err {err:.3g}), length ceil(new*len/orig)")
        _check(kern.shape == (nn, 2 * width + o), f"  kernel shape {list(kern.shape)} = [new, 2*width + orig]")
    # a low tone survives 44.1k -> 16k with ~unit gain away from the edges
    tt = np.arange(4410) / 44100
    yy, _, _, _ = resample(np.sin(2 * np.pi * 440 * tt), 44100, 16000)
    ref = np.sin(2 * np.pi * 440 * np.arange(len(yy)) / 16000)
    _check(np.max(np.abs(yy - ref)[100:-100]) < 2e-3, "440 Hz tone through 44.1k -> 16k")
    print("self-test passed")


def main(argv):
    if "--self-test" in argv:
        self_test()
        return
    out_dir = argv[0] if argv else os.path.join("test", "fixtures", "audio")
    build_fixtures(out_dir)


if __name__ == "__main__":
    main(sys.argv[1:])
