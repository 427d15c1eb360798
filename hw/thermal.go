package hw

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// ThermalZone is one kernel thermal zone.
type ThermalZone struct {
	// Zone is the zone's number: 2 for thermal_zone2.
	Zone int
	// Type names the sensor, e.g. "cpu-thermal" on a Raspberry Pi.
	Type string
	// Temp is the temperature in degrees Celsius.
	Temp float64
}

const thermalDir = "sys/class/thermal/"

// ThermalZones reads sys/class/thermal/thermal_zone*, sorted by zone
// number. A zone whose type or temperature cannot be read is skipped:
// some drivers answer EIO or ENODATA while the sensor is not ready. When
// there are no readable zones the error wraps fs.ErrNotExist. A zone whose
// temperature does not parse makes an error, returned together with the
// zones that did parse.
func (f FS) ThermalZones() ([]ThermalZone, error) {
	dirs, err := f.Glob(thermalDir + "thermal_zone*")
	if err != nil {
		return nil, err
	}
	var zones []ThermalZone
	var errs []error
	for _, dir := range dirs {
		n, ok := thermalZoneNumber(path.Base(dir))
		if !ok {
			continue
		}
		typ, err := f.ReadString(dir + "/type")
		if err != nil {
			continue
		}
		b, err := f.ReadFile(dir + "/temp")
		if err != nil {
			continue
		}
		t, err := parseThermalTemp(b)
		if err != nil {
			errs = append(errs, fmt.Errorf("hw: parsing %s/temp: %w", dir, err))
			continue
		}
		zones = append(zones, ThermalZone{Zone: n, Type: typ, Temp: t})
	}
	slices.SortFunc(zones, func(a, b ThermalZone) int { return cmp.Compare(a.Zone, b.Zone) })
	if len(zones) == 0 && len(errs) == 0 {
		return nil, fmt.Errorf("hw: no readable thermal zone in %s: %w", f.Path(thermalDir), fs.ErrNotExist)
	}
	return zones, errors.Join(errs...)
}

// cpuZoneTypes are the zone types that measure the CPU, best first:
// Raspberry Pi, Intel, Rockchip and Allwinner boards.
var cpuZoneTypes = []string{"cpu-thermal", "x86_pkg_temp", "soc_thermal"}

// CPUTemp picks the CPU's temperature from zones: the first zone of a known
// CPU type, else zone 0 (the zone kvmd reads). It reports false when there
// is neither.
func CPUTemp(zones []ThermalZone) (float64, bool) {
	for _, typ := range cpuZoneTypes {
		for _, z := range zones {
			if z.Type == typ {
				return z.Temp, true
			}
		}
	}
	for _, z := range zones {
		if z.Zone == 0 {
			return z.Temp, true
		}
	}
	return 0, false
}

// thermalZoneNumber returns n for a directory named thermal_zone<n>.
func thermalZoneNumber(name string) (int, bool) {
	s, ok := strings.CutPrefix(name, "thermal_zone")
	if !ok || s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, false
	}
	return n, true
}

// parseThermalTemp parses a thermal zone's temp attribute: millidegrees
// Celsius, negative below freezing.
func parseThermalTemp(b []byte) (float64, error) {
	s := strings.TrimSpace(string(b))
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("temperature %q: %w", s, err)
	}
	// Anything beyond ±1000 °C is a driver error code or garbage.
	if n < -1_000_000 || n > 1_000_000 {
		return 0, fmt.Errorf("temperature %q out of range", s)
	}
	return float64(n) / 1000, nil
}
