package ugpio

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrSpec is a channel's configuration that cannot be read.
var ErrSpec = errors.New("ugpio: bad output")

// SplitSpec reads NAME=PIN[,OPTION[=VALUE]]... (the form of the
// configuration's gpio-output and atx-pin entries): an option without a
// value is "1". Blanks around each part are dropped; a name, a pin or an
// option given twice is refused.
func SplitSpec(spec string) (name, pin string, opts map[string]string, err error) {
	head, rest, _ := strings.Cut(spec, ",")
	name, pin, ok := strings.Cut(head, "=")
	name, pin = strings.TrimSpace(name), strings.TrimSpace(pin)
	if !ok || name == "" || pin == "" {
		return "", "", nil, fmt.Errorf("%w: %q is not NAME=PIN[,OPTION=VALUE...]", ErrSpec, spec)
	}
	opts = map[string]string{}
	if rest == "" {
		return name, pin, opts, nil
	}
	for _, part := range strings.Split(rest, ",") {
		k, v, hasValue := strings.Cut(part, "=")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !hasValue {
			v = "1"
		}
		if k == "" {
			return "", "", nil, fmt.Errorf("%w: %s: an empty option", ErrSpec, name)
		}
		if _, dup := opts[k]; dup {
			return "", "", nil, fmt.Errorf("%w: %s: option %s given twice", ErrSpec, name, k)
		}
		opts[k] = v
	}
	return name, pin, opts, nil
}

// ParseBool reads a boolean as kvmd's valid_bool does: 1, true, yes, on
// or 0, false, no, off, any case.
func ParseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, fmt.Errorf("%w: %q is not a boolean (1/true/yes or 0/false/no)", ErrSpec, s)
}

// ParseOutput reads an output channel of the configuration:
// NAME=PIN[,switch=BOOL][,pulse=SECONDS][,pulse-min=SECONDS][,pulse-max=SECONDS]
// [,busy-delay=SECONDS][,inverted[=BOOL]][,initial=BOOL], kvmd's options
// of an output (switch, pulse.delay, pulse.min_delay, pulse.max_delay,
// busy_delay, inverted, initial) with kvmd's defaults (DefaultOutput);
// pulse=0 allows no pulse. line makes the channel's line from PIN.
func ParseOutput(spec string, line func(pin string) (Line, error)) (Output, error) {
	name, pin, opts, err := SplitSpec(spec)
	if err != nil {
		return Output{}, err
	}
	out := DefaultOutput(name, nil)
	out.Pin = pin
	for k, v := range opts {
		var err error
		switch k {
		case "switch":
			out.Switch, err = ParseBool(v)
		case "inverted":
			out.Inverted, err = ParseBool(v)
		case "initial":
			out.Initial, err = ParseBool(v)
		case "pulse":
			out.Pulse, err = seconds(v)
		case "pulse-min":
			out.MinPulse, err = seconds(v)
		case "pulse-max":
			out.MaxPulse, err = seconds(v)
		case "busy-delay":
			out.BusyDelay, err = seconds(v)
		default:
			err = fmt.Errorf("%w: no option %q (switch, pulse, pulse-min, pulse-max, busy-delay, inverted, initial)", ErrSpec, k)
		}
		if err != nil {
			return Output{}, fmt.Errorf("output %s: %w", name, err)
		}
	}
	// kvmd holds the default delay to [min, max] too.
	if out.Pulse > 0 {
		out.Pulse = min(max(out.Pulse, out.MinPulse), out.MaxPulse)
	}
	if err := out.checkOptions(); err != nil {
		return Output{}, fmt.Errorf("%w: %w", ErrSpec, err)
	}
	if out.Line, err = line(pin); err != nil {
		return Output{}, fmt.Errorf("output %s: %w", name, err)
	}
	return out, nil
}

func seconds(s string) (time.Duration, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q is not a number of seconds", ErrSpec, s)
	}
	d, err := Seconds(f)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrSpec, err)
	}
	return d, nil
}
