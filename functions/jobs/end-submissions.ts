import { messageConsumer } from '../../shared/work/consumer';
import { cancelledJobOf, endSubmissionsOfCancelledJob } from '../../shared/work/cancelled-job';

/** Queue `cancellations`: a job was cancelled → its pending submissions are rejected (spec, job cancel). */
export const handler = messageConsumer('cancellations', cancelledJobOf, endSubmissionsOfCancelledJob);
