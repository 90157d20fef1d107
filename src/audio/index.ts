// The audio surface: windows, mel filterbanks, spectrograms, Whisper's log-mel features, resampling, the built-in
// test signal. The transforms themselves (fft, stft, conv1d) live in ops/.
export { hannWindow, hammingWindow, blackmanWindow, type WindowOptions } from './windows.js';
export { melFilterbank, melFilterbankValues, hzToMel, melToHz, type MelFilterbankOptions, type MelScale } from './mel-filterbank.js';
export { spectrogram, melSpectrogram, amplitudeToDb, type SpectrogramOptions, type MelSpectrogramOptions, type AmplitudeToDbOptions } from './spectrogram.js';
export { logMelSpectrogram, WHISPER_SAMPLE_RATE, WHISPER_N_FFT, WHISPER_HOP_LENGTH, WHISPER_N_SAMPLES, type LogMelOptions } from './whisper.js';
export { resample, resampleKernel, type ResampleOptions, type ResampleKernel } from './resample.js';
export { syntheticSignal } from './synthetic.js';
