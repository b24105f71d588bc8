import { stageConsumer } from '../../shared/work/consumer';
import { scoreObject } from '../../shared/work/scoring-stage';

/** Queue `scoring` (D54): measure, D26 pre-checks, D28 provider, then the fan-in (D27, D29). */
export const handler = stageConsumer('scoring', scoreObject);
