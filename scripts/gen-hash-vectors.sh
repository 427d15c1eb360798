#!/bin/bash
# Regenerates the password hash test vectors of auth from the real
# tools, so that the tests check our verifiers against what those tools
# write rather than against our own idea of the formats.
#
# Needs: apache2-utils (htpasswd), openssl, whois (mkpasswd). Salts are
# random: every run writes different, equally valid vectors.
#
# Output, under auth/testdata/:
#   hash-vectors.tsv  tool <TAB> password <TAB> hash, one vector a line
#   htpasswd.apache   a users file written by htpasswd itself
set -euo pipefail

cd "$(dirname "$0")/../auth/testdata"
for tool in htpasswd openssl mkpasswd base64; do
	command -v "$tool" >/dev/null || { echo "$0: $tool not found" >&2; exit 1; }
done

passwords=(
	'hunter2'
	'pass:word'                          # a colon: split at the first one only
	'correct horse battery staple'       # spaces
	' lead and trail '
	'~!@#$%^&*()_+`-={}|[]\;'"'"'"<>?,./'  # every shell metacharacter
	'x'
)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$tmp/vectors

vector() { # tool password hash
	printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$out"
}

# htpasswd -nb prints user:hash; the hash is everything after the first colon.
from_htpasswd() { # password flags...
	local pw=$1
	shift
	htpasswd -nb "$@" kvmd "$pw" | head -n1 | cut -d: -f2-
}

# LDAP salted digest: base64(digest(password + salt) + salt).
ldap_salted() { # dgst-name prefix salt-bytes password
	openssl rand -out "$tmp/salt" "$3"
	printf '%s' "$4" >"$tmp/pw"
	cat "$tmp/pw" "$tmp/salt" | openssl dgst "-$1" -binary >"$tmp/digest"
	printf '%s%s' "$2" "$(cat "$tmp/digest" "$tmp/salt" | base64 -w0)"
}

for pw in "${passwords[@]}"; do
	vector "htpasswd -m" "$pw" "$(from_htpasswd "$pw" -m)"
	vector "htpasswd -s" "$pw" "$(from_htpasswd "$pw" -s)"
	vector "htpasswd -B -C 4" "$pw" "$(from_htpasswd "$pw" -B -C 4)"
	vector "htpasswd -2" "$pw" "$(from_htpasswd "$pw" -2)"
	vector "htpasswd -5 -r 1000" "$pw" "$(from_htpasswd "$pw" -5 -r 1000)"
	vector "openssl passwd -apr1" "$pw" "$(printf '%s\n' "$pw" | openssl passwd -apr1 -stdin)"
	vector "openssl passwd -5" "$pw" "$(printf '%s\n' "$pw" | openssl passwd -5 -stdin)"
	vector "openssl passwd -6" "$pw" "$(printf '%s\n' "$pw" | openssl passwd -6 -stdin)"
	vector "mkpasswd -m sha-512 -R 1500" "$pw" "$(printf '%s' "$pw" | mkpasswd -s -m sha-512 -R 1500)"
	vector "mkpasswd -m sha-256 -R 2000" "$pw" "$(printf '%s' "$pw" | mkpasswd -s -m sha-256 -R 2000)"
	vector "openssl dgst -sha512 (SSHA512, 8-byte salt)" "$pw" "$(ldap_salted sha512 '{SSHA512}' 8 "$pw")"
	vector "openssl dgst -sha512 (SSHA512, 16-byte salt)" "$pw" "$(ldap_salted sha512 '{SSHA512}' 16 "$pw")"
	vector "openssl dgst -sha256 (SSHA256, 8-byte salt)" "$pw" "$(ldap_salted sha256 '{SSHA256}' 8 "$pw")"
	vector "openssl dgst -sha1 (SSHA, 4-byte salt)" "$pw" "$(ldap_salted sha1 '{SSHA}' 4 "$pw")"
done
# One bcrypt at htpasswd's default cost, which writes $2y$05$.
vector "htpasswd -B" "hunter2" "$(from_htpasswd hunter2 -B)"
vector "htpasswd -5" "hunter2" "$(from_htpasswd hunter2 -5)"
# mkpasswd's default rounds (no rounds= field).
vector "mkpasswd -m sha-512" "hunter2" "$(printf '%s' hunter2 | mkpasswd -s -m sha-512)"

{
	echo "# Test vectors for auth, written by scripts/gen-hash-vectors.sh."
	echo "# tool<TAB>password<TAB>hash"
	cat "$out"
} >hash-vectors.tsv

# A users file as htpasswd writes it, one user per scheme; every password is
# the user name followed by "-pw". plain and des hold hashes we refuse
# (plaintext, DES crypt): their passwords must never match.
rm -f "$tmp/htpasswd"
htpasswd -cbm "$tmp/htpasswd" admin 'admin-pw' 2>/dev/null
htpasswd -bs "$tmp/htpasswd" sha_user 'sha_user-pw' 2>/dev/null
htpasswd -bB -C 4 "$tmp/htpasswd" bcrypt.user 'bcrypt.user-pw' 2>/dev/null
htpasswd -b2 "$tmp/htpasswd" sha256-user 'sha256-user-pw' 2>/dev/null
htpasswd -b5 "$tmp/htpasswd" sha512@user 'sha512@user-pw' 2>/dev/null
htpasswd -bp "$tmp/htpasswd" plain 'plain-pw' 2>/dev/null
htpasswd -bd "$tmp/htpasswd" des 'des-pw' 2>/dev/null
cp "$tmp/htpasswd" htpasswd.apache
