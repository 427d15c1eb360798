package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"time"

	"periph.io/x/conn/v3/gpio"

	"kvmd/atx"
	"kvmd/httpd"
	"kvmd/hw"
	"kvmd/msd"
	"kvmd/redfish"
	"kvmd/ugpio"
	"kvmd/wol"
)

// defaultRemoteDeny is msd.DefaultDeny as --msd-remote-deny's default.
func defaultRemoteDeny() []string {
	var out []string
	for _, p := range msd.DefaultDeny {
		out = append(out, p.String())
	}
	return out
}

// atxLines are --atx-pin's names, each an atx.Pins line.
var atxLines = []string{"power_led", "hdd_led", "power_switch", "reset_switch"}

// atxSpec is --atx-pin read: the pin of each line, and the LEDs'
// inversion.
type atxSpec struct {
	pins                map[string]string
	powerInv, hddInvert bool
}

// parseATXPins reads --atx-pin: all four lines or none, inverted only on
// the LEDs.
func parseATXPins(list []string) (*atxSpec, error) {
	if len(list) == 0 {
		return nil, nil
	}
	spec := &atxSpec{pins: map[string]string{}}
	for _, item := range list {
		name, pin, opts, err := ugpio.SplitSpec(item)
		if err != nil {
			return nil, fmt.Errorf("--atx-pin: %w", err)
		}
		if !slices.Contains(atxLines, name) {
			return nil, fmt.Errorf("--atx-pin %q: the line is one of %s", item, strings.Join(atxLines, ", "))
		}
		if _, dup := spec.pins[name]; dup {
			return nil, fmt.Errorf("--atx-pin: %s given twice", name)
		}
		spec.pins[name] = pin
		for k, v := range opts {
			inv, err := ugpio.ParseBool(v)
			if k != "inverted" || err != nil || (name != "power_led" && name != "hdd_led") {
				return nil, fmt.Errorf("--atx-pin %q: the only option is inverted, of power_led and hdd_led", item)
			}
			if name == "power_led" {
				spec.powerInv = inv
			} else {
				spec.hddInvert = inv
			}
		}
	}
	if len(spec.pins) != len(atxLines) {
		return nil, fmt.Errorf("--atx-pin: give all four lines (%s)", strings.Join(atxLines, ", "))
	}
	return spec, nil
}

// checkGPIO checks the GPIO outputs, the ATX pins and Wake-on-LAN, and
// that no pin serves twice.
func (c *Config) checkGPIO() error {
	used := map[string]string{}
	take := func(pin, what string) error {
		if prev, ok := used[pin]; ok {
			return fmt.Errorf("pin %s is both %s and %s", pin, prev, what)
		}
		used[pin] = what
		return nil
	}
	spec, err := parseATXPins(c.ATXPins)
	if err != nil {
		return err
	}
	if spec != nil {
		for _, l := range atxLines {
			if err := take(spec.pins[l], "ATX "+l); err != nil {
				return fmt.Errorf("--atx-pin: %w", err)
			}
		}
	}
	names := map[string]bool{}
	for _, item := range c.GPIOOutputs {
		o, err := ugpio.ParseOutput(item, func(string) (ugpio.Line, error) { return ugpio.NewPin(nil), nil })
		if err != nil {
			return fmt.Errorf("--gpio-output: %w", err)
		}
		if names[o.Name] || o.Name == ugpio.WoLChannel {
			return fmt.Errorf("--gpio-output %q: channel %s given twice, or kvmd's own", item, o.Name)
		}
		names[o.Name] = true
		if err := take(o.Pin, "GPIO output "+o.Name); err != nil {
			return fmt.Errorf("--gpio-output: %w", err)
		}
	}
	if c.WoLMAC != "" {
		if _, err := c.wolSender(); err != nil {
			return err
		}
	}
	return nil
}

// wolSender is the Wake-on-LAN sender of --wol-mac, --wol-ip, --wol-port.
func (c *Config) wolSender() (wol.Sender, error) {
	mac, err := wol.ParseMAC(c.WoLMAC)
	if err != nil {
		return wol.Sender{}, fmt.Errorf("--wol-mac: %w", err)
	}
	ip, err := netip.ParseAddr(strings.TrimSpace(c.WoLIP))
	if err != nil || !ip.Is4() {
		return wol.Sender{}, fmt.Errorf("--wol-ip %q: not an IPv4 address", c.WoLIP)
	}
	if c.WoLPort < 1 || c.WoLPort > 65535 {
		return wol.Sender{}, fmt.Errorf("--wol-port %d: not a port (1 to 65535)", c.WoLPort)
	}
	s := wol.Sender{MAC: mac, Addr: netip.AddrPortFrom(ip, uint16(c.WoLPort))}
	return s, s.Check()
}

// atxBoard returns the ATX board's pins: --atx-pin's, else the board
// profile's (atx.BoardPins); nil when there are none, or when a pin
// --atx-pin names cannot be found (logged).
func atxBoard(c Config, profile []hw.PinSpec, log *slog.Logger) *atx.Pins {
	spec, err := parseATXPins(c.ATXPins)
	if err != nil || spec == nil {
		return atx.BoardPins(profile)
	}
	pins, err := configATXPins(spec)
	if err != nil {
		log.Warn("ATX unavailable", "err", err)
		return nil
	}
	return pins
}

// configATXPins looks up the pins of an --atx-pin.
func configATXPins(spec *atxSpec) (*atx.Pins, error) {
	var err error
	var found [4]gpio.PinIO
	for i, l := range atxLines {
		if found[i], err = hw.LookupPin(spec.pins[l]); err != nil {
			return nil, fmt.Errorf("--atx-pin %s: %w", l, err)
		}
	}
	return &atx.Pins{PowerLED: found[0], HDDLED: found[1], PowerSwitch: found[2], ResetSwitch: found[3],
		PowerLEDActiveLow: spec.powerInv, HDDActiveLow: spec.hddInvert}, nil
}

// newOutputs makes the GPIO output channels of --gpio-output and
// --wol-mac, each set to its initial state, and adds their release (a
// pulse under way ended, its line set back) to sup; a channel whose pin
// cannot be found or taken is left out, with a warning. wake gets a value
// when a channel becomes busy or idle (the "gpio" subsystem's Wake).
func newOutputs(sup *Supervisor, c Config, log *slog.Logger, wake chan<- struct{}) *ugpio.Outputs {
	var outs []ugpio.Output
	for _, item := range c.GPIOOutputs {
		o, err := ugpio.ParseOutput(item, func(pin string) (ugpio.Line, error) {
			p, err := hw.LookupPin(pin)
			if err != nil {
				return nil, err
			}
			return ugpio.NewPin(p), nil
		})
		if err != nil {
			log.Warn("GPIO output left out", "err", err)
			continue
		}
		outs = append(outs, o)
	}
	if c.WoLMAC != "" {
		s, err := c.wolSender()
		if err != nil {
			log.Warn("Wake-on-LAN left out", "err", err)
		} else {
			outs = append(outs, ugpio.WoLOutput(s))
		}
	}
	onChange := func() {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
	o, err := ugpio.New(ugpio.Config{Outputs: outs, OnChange: onChange, Log: log})
	if err != nil {
		log.Warn("GPIO outputs left out", "err", err)
	}
	if names := o.Names(); len(names) > 0 {
		log.Info("GPIO outputs", "channels", strings.Join(names, ","))
	}
	sup.Add(Child{Name: "gpio outputs", Run: Loop(func(ctx context.Context) {
		<-ctx.Done()
		o.Close()
	})})
	return o
}

// redfishConfig is the Redfish service over the devices: the ATX board's
// power, the virtual media (with write_remote's download options), the
// session idle timeout, the host's name.
func redfishConfig(c Config, env Env, m *machine, d *httpd.Devices, media *msd.Manager) *redfish.Config {
	rc := &redfish.Config{
		Remote: msd.FetchOptions{Timeout: 10 * time.Second, Stall: httpd.DefaultMSDStall, UserAgent: "kvmd",
			Deny: d.MSDRemoteDeny},
		SessionTimeout: int(c.SessionIdle / time.Second),
		HostName:       m.hostName,
		Version:        env.Version,
	}
	if d.ATX != nil {
		rc.Power = redfish.ATX{C: d.ATX}
	}
	if media != nil { // a nil *Manager in the interface would be a drive
		rc.Media = media
	}
	return rc
}
