package whep

import (
	"fmt"
	"log/slog"

	"github.com/pion/logging"
)

// logFactory gives pion's packages the daemon's log: their errors and
// warnings as warnings, the rest at debug level, with the package's
// scope.
type logFactory struct{ log *slog.Logger }

func (f logFactory) NewLogger(scope string) logging.LeveledLogger {
	return pionLog{f.log.With("pion", scope)}
}

type pionLog struct{ l *slog.Logger }

func (p pionLog) Trace(string)          {}
func (p pionLog) Tracef(string, ...any) {}
func (p pionLog) Debug(m string)        { p.l.Debug("WebRTC: " + m) }
func (p pionLog) Debugf(f string, a ...any) {
	p.l.Debug("WebRTC: " + fmt.Sprintf(f, a...))
}
func (p pionLog) Info(m string) { p.l.Debug("WebRTC: " + m) }
func (p pionLog) Infof(f string, a ...any) {
	p.l.Debug("WebRTC: " + fmt.Sprintf(f, a...))
}
func (p pionLog) Warn(m string) { p.l.Warn("WebRTC: " + m) }
func (p pionLog) Warnf(f string, a ...any) {
	p.l.Warn("WebRTC: " + fmt.Sprintf(f, a...))
}
func (p pionLog) Error(m string) { p.l.Warn("WebRTC: " + m) }
func (p pionLog) Errorf(f string, a ...any) {
	p.l.Warn("WebRTC: " + fmt.Sprintf(f, a...))
}
