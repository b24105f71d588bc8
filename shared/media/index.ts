/** Media analysis library: upload checks, measurement, region, quality, annotations. */
export * from './sniff';
export * from './metadata';
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
