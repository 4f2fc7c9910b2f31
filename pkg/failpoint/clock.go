package failpoint

import (
	"time"

	"github.com/jonboulle/clockwork"
)

// EnvClockFile names the environment variable giving a file that holds a
// duration (time.ParseDuration syntax, e.g. "-2h"): in a failpoints build,
// the offset added to every time the process reads from the clock that
// Clock wraps. A test steps a node's clock by rewriting the file; an
// absent or empty file is no offset.
const EnvClockFile = "NICO_FAILPOINT_CLOCK_FILE"

// ClockReread is how often a stepped clock reads its file again.
const ClockReread = 100 * time.Millisecond

// Clock returns c. In a failpoints build with EnvClockFile set, it returns
// c stepped by the file's offset: Now (and so Since and Until) are moved,
// timers, tickers and sleeps keep real durations.
var Clock = func(c clockwork.Clock) clockwork.Clock { return c }
