"""Types key events as a Linux desktop does, with libxkbcommon itself.

Reads a JSON request on stdin:

    {"locale": "en_US.UTF-8",
     "layouts": [{"layout": "de", "variant": "", "own_symbols": false,
                  "cases": [[[code, down], ...], ...]}]}

where each case is a list of Linux input key codes (linux/input-event-codes.h)
with 1 for a press and 0 for a release, and writes, for each layout, for
each case, what the host typed:

    {"layouts": [[{"text": "...", "pending": false, "cancelled": false}, ...], ...]}

Each layout is compiled by libxkbcommon from xkeyboard-config's rules
(evdev, model pc105, no options: the defaults of xkbcli), and key presses
go through the locale's compose table (libX11's Compose file) as
xkbcli interactive-evdev does it (tools/interactive-evdev.c in
libxkbcommon 1.5): a press's keysym is fed to the compose state; while a
sequence is under way (a dead key) nothing is typed, a finished sequence
types its result, a cancelled one types nothing, and otherwise the key
types its own text. With "own_symbols", the keymap is compiled from the
layout's own symbols alone (xkb_symbols { include "de" }), without the
"pc" symbols the rules add to every layout, but for the left Shift (the
layouts leave it to "pc"). "pending" says a sequence was still under way at the
end of the case, "cancelled" that one was cancelled in it. Every case
starts from a fresh state (no key held, no lock on, no sequence).
"""

import ctypes
import json
import sys

# Exit status 3: libxkbcommon is not installed (the caller says so).
NO_LIBRARY = 3
try:
    lib = ctypes.CDLL("libxkbcommon.so.0")
except OSError as e:
    print(e, file=sys.stderr)
    sys.exit(NO_LIBRARY)


class RuleNames(ctypes.Structure):
    _fields_ = [(name, ctypes.c_char_p) for name in ("rules", "model", "layout", "variant", "options")]


def fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


P, U32, INT = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int
context_new = fn("xkb_context_new", P, INT)
keymap_new_from_names = fn("xkb_keymap_new_from_names", P, P, ctypes.POINTER(RuleNames), INT)
keymap_new_from_string = fn("xkb_keymap_new_from_string", P, P, ctypes.c_char_p, INT, INT)
keymap_unref = fn("xkb_keymap_unref", None, P)
state_new = fn("xkb_state_new", P, P)
state_unref = fn("xkb_state_unref", None, P)
state_update_key = fn("xkb_state_update_key", INT, P, U32, INT)
state_key_get_one_sym = fn("xkb_state_key_get_one_sym", U32, P, U32)
state_key_get_utf8 = fn("xkb_state_key_get_utf8", INT, P, U32, ctypes.c_char_p, ctypes.c_size_t)
compose_table_new_from_locale = fn("xkb_compose_table_new_from_locale", P, P, ctypes.c_char_p, INT)
compose_state_new = fn("xkb_compose_state_new", P, P, INT)
compose_state_feed = fn("xkb_compose_state_feed", INT, P, U32)
compose_state_get_status = fn("xkb_compose_state_get_status", INT, P)
compose_state_get_utf8 = fn("xkb_compose_state_get_utf8", INT, P, ctypes.c_char_p, ctypes.c_size_t)
compose_state_reset = fn("xkb_compose_state_reset", None, P)

CONTEXT_NO_ENVIRONMENT_NAMES = 1 << 1
KEYMAP_FORMAT_TEXT_V1 = 1
KEY_UP, KEY_DOWN = 0, 1
COMPOSE_NOTHING, COMPOSE_COMPOSING, COMPOSE_COMPOSED, COMPOSE_CANCELLED = 0, 1, 2, 3
EVDEV_OFFSET = 8


def type_case(keymap, compose, case):
    state = state_new(keymap)
    compose_state_reset(compose)
    buf = ctypes.create_string_buffer(64)
    out = []
    cancelled = False
    try:
        for code, down in case:
            kc = code + EVDEV_OFFSET
            if not down:
                state_update_key(state, kc, KEY_UP)
                continue
            compose_state_feed(compose, state_key_get_one_sym(state, kc))
            status = compose_state_get_status(compose)
            if status == COMPOSE_COMPOSED:
                compose_state_get_utf8(compose, buf, len(buf))
                out.append(buf.value)
            elif status == COMPOSE_NOTHING:
                state_key_get_utf8(state, kc, buf, len(buf))
                out.append(buf.value)
            if status in (COMPOSE_COMPOSED, COMPOSE_CANCELLED):
                cancelled = cancelled or status == COMPOSE_CANCELLED
                compose_state_reset(compose)
            state_update_key(state, kc, KEY_DOWN)
        pending = compose_state_get_status(compose) == COMPOSE_COMPOSING
    finally:
        state_unref(state)
    return {"text": b"".join(out).decode("utf-8"), "pending": pending, "cancelled": cancelled}


def main():
    req = json.load(sys.stdin)
    ctx = context_new(CONTEXT_NO_ENVIRONMENT_NAMES)
    if not ctx:
        sys.exit("xkb_context_new failed")
    table = compose_table_new_from_locale(ctx, req["locale"].encode(), 0)
    if not table:
        sys.exit("no compose table for locale %s (libX11's Compose files: Debian libx11-data)" % req["locale"])
    compose = compose_state_new(table, 0)
    result = []
    for lay in req["layouts"]:
        layout, variant = lay["layout"], lay.get("variant", "")
        if lay.get("own_symbols"):
            symbols = layout + ("(%s)" % variant if variant else "")
            text = ('xkb_keymap { xkb_keycodes { include "evdev+aliases(qwerty)" }; '
                    'xkb_types { include "complete" }; xkb_compat { include "complete" }; '
                    'xkb_symbols { include "%s" key <LFSH> { [ Shift_L ] }; '
                    'modifier_map Shift { <LFSH> }; }; };' % symbols)
            keymap = keymap_new_from_string(ctx, text.encode(), KEYMAP_FORMAT_TEXT_V1, 0)
        else:
            names = RuleNames(b"evdev", b"pc105", layout.encode(), variant.encode(), b"")
            keymap = keymap_new_from_names(ctx, ctypes.byref(names), 0)
        if not keymap:
            sys.exit("libxkbcommon could not compile layout %s(%s)" % (layout, variant))
        try:
            result.append([type_case(keymap, compose, c) for c in lay["cases"]])
        finally:
            keymap_unref(keymap)
    json.dump({"layouts": result}, sys.stdout, ensure_ascii=False)


main()
