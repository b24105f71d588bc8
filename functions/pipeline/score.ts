import { messageConsumer } from '../../shared/work/consumer';
import { scoreObject } from '../../shared/work/scoring-stage';
import { parseScoringMessage } from '../../shared/work/stage-message';
import { tryVerdict } from '../../shared/work/verdict';

/**
 * Queue `scoring` (D54): measure, D26 pre-checks, D28 provider, then the fan-in (D27, D29). A
 * fan-in item's record (an upload completed after both stages wrote) takes that round's verdict.
 */
export const handler = messageConsumer('scoring', parseScoringMessage, async (m) =>
  'key' in m ? scoreObject(m.key) : (await tryVerdict(m.fanIn)) ? 'stored' : 'skipped',
);
