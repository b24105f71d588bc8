/** Media analysis library: upload checks, measurement, region, quality, annotations. */
export {
  ACCEPTED_CONTENT_TYPES,
  MAX_SIZE_BYTES,
  normalizeContentType,
  categoryOf,
  mp4TrackHandlers,
  sniffContentType,
  sniffMatches,
  type MediaCategory,
  type AcceptedContentType,
  type Sniffed,
} from './sniff';
export * from './upload-check';
export * from './trailing-data';
export * from './metadata';
export { normalizeOffset, exifDateToIso, deviceModel, readExif, type ExifFields } from './exif';
export * from './audio-info';
export * from './probe-fields';
export * from './region';
export * from './image-quality';
export { selectKth, dominantColours, type PaletteColour } from './pixel-statistics';
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
