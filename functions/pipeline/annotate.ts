import { stageConsumer } from '../../shared/work/consumer';
import { annotateObject } from '../../shared/work/annotation-stage';

/** Queue `annotation` (D54, D55): annotations (+ video keyframes), then the fan-in. */
export const handler = stageConsumer('annotation', annotateObject);
