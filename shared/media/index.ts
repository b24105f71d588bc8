/** Media analysis library: upload checks, measurement, region, quality, annotations. */
export * from './sniff';
export * from './metadata';
export { normalizeOffset, exifDateToIso, deviceModel, readExif, type ExifFields } from './exif';
export * from './audio-info';
export * from './probe-fields';
export * from './region';
export * from './image-quality';
export * from './annotate-image';
export { ffprobe, ffprobePath, ffmpegPath, MediaToolMissingError } from './ffmpeg';
export * from './keyframes';
export {
  annotationProviderFor,
  defaultAnnotationProvider,
  LocalAnnotationProvider,
  BedrockAnnotationProvider,
  warmUp as warmUpAnnotationModels,
  shutdownModels as shutdownAnnotationModels,
} from './annotation/index';
