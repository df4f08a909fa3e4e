#!/bin/sh
# fencekit's guard for etcd from a shell: the one transaction of docs/guard-in-your-database.md
# ("etcd"), sent to etcd's v3 JSON gateway with curl, keys and values in base64 (any bytes), its
# arguments checked first.
#
#   fencekit-etcd-guard.sh FENCE_KEY TOKEN [DATA_KEY VALUE]   raise the fence to TOKEN and put
#                                                             DATA_KEY=VALUE, together
#   fencekit-etcd-guard.sh --delete FENCE_KEY TOKEN DATA_KEY  the same, deleting DATA_KEY
#   (FENCE_KEY TOKEN alone raises the fence only: a claim before a read)
#
# Environment: ETCD_URL, the gateway (default http://127.0.0.1:2379); ETCD_CURL_OPTS, more
# curl options, split on spaces (e.g. --cacert ca.pem --user name:password).
#
# Exit codes: 0 accepted (the fence and the data written in one transaction); 3 stale: nothing
# written, and stderr says "FENCE stale token T for fence key "K": the highest is H"; 2 a bad
# argument, nothing sent: a token that is not the canonical decimal of 1..9223372036854775807
# (no sign, no leading zero, no spaces), a fence key that is not 1 to 1024 bytes without control
# characters, an empty data key or the fence key again; 1 no answer from etcd, or one it
# refused: the write may or may not have happened.
set -u
export LC_ALL=C  # ${#x} counts bytes; [[:cntrl:]] is ASCII's

url=${ETCD_URL:-http://127.0.0.1:2379}
op=put
if [ "${1:-}" = --delete ]; then
  op=delete
  shift
fi
bad() {
  echo "fencekit-etcd-guard.sh: $1" >&2
  exit 2
}
[ $# -ge 2 ] || bad "usage: fencekit-etcd-guard.sh [--delete] FENCE_KEY TOKEN [DATA_KEY [VALUE]]"
fence=$1
token=$2
case $token in
  '' | 0* | *[!0-9]*) bad "the token must be a decimal integer in 1..9223372036854775807 (no sign, no leading zeros)" ;;
esac
if [ ${#token} -gt 19 ] || { [ ${#token} -eq 19 ] && [ "$token" \> 9223372036854775807 ]; }; then
  bad "the token must be a decimal integer in 1..9223372036854775807 (no sign, no leading zeros)"
fi
case $fence in
  *[[:cntrl:]]*) bad "the fence key must be 1 to 1024 bytes without control characters" ;;
esac
[ ${#fence} -ge 1 ] && [ ${#fence} -le 1024 ] ||
  bad "the fence key must be 1 to 1024 bytes without control characters"
data=
if [ $op = delete ]; then
  [ $# -eq 3 ] || bad "--delete takes FENCE_KEY TOKEN DATA_KEY"
  data=$3
elif [ $# -eq 4 ]; then
  data=$3
elif [ $# -ne 2 ]; then
  bad "give FENCE_KEY TOKEN, or FENCE_KEY TOKEN DATA_KEY VALUE"
fi
if [ $# -gt 2 ] && { [ -z "$data" ] || [ "$data" = "$fence" ]; }; then
  bad "the data key must be non-empty and not the fence key"
fi

b64() { printf '%s' "$1" | base64 | tr -d '\n'; }
# 20 digits, zero-padded: etcd compares values byte by byte, so every fence value has one width.
padded=$(printf '%020d' "$token")
k=$(b64 "$fence")
v=$(b64 "$padded")
ops="{\"request_put\":{\"key\":\"$k\",\"value\":\"$v\"}}"
if [ $op = delete ]; then
  ops="$ops,{\"request_delete_range\":{\"key\":\"$(b64 "$data")\"}}"
elif [ $# -eq 4 ]; then
  ops="$ops,{\"request_put\":{\"key\":\"$(b64 "$data")\",\"value\":\"$(b64 "$4")\"}}"
fi
# The compare is the stale case (a value compare on a missing key is false, so a new fence
# takes the writing branch); the refusing branch is empty.
body="{\"compare\":[{\"key\":\"$k\",\"target\":\"VALUE\",\"result\":\"GREATER\",\"value\":\"$v\"}],\"failure\":[$ops]}"
# shellcheck disable=SC2086 # ETCD_CURL_OPTS is split on purpose
reply=$(printf '%s' "$body" | curl -sS --max-time 10 ${ETCD_CURL_OPTS:-} -X POST \
  --data-binary @- -w '\n%{http_code}' "$url/v3/kv/txn") || exit 1
status=${reply##*
}
case $status in
  200) ;;
  *) echo "fencekit-etcd-guard.sh: etcd answered HTTP $status: ${reply%
*}" >&2; exit 1 ;;
esac
case $reply in
  *'"succeeded":true'*) ;;
  *) exit 0 ;;
esac
# Refused: read the fence for the message.
# shellcheck disable=SC2086
range=$(curl -sS --max-time 10 ${ETCD_CURL_OPTS:-} -X POST --data-binary "{\"key\":\"$k\"}" \
  "$url/v3/kv/range") || range=
highest=$(printf '%s' "$range" | sed -n 's/.*"value":"\([A-Za-z0-9+/=]*\)".*/\1/p' |
  base64 -d 2>/dev/null | sed 's/^0*//')
shown=$(printf '%s' "$fence" | od -An -v -tx1 | awk '
  { for (i = 1; i <= NF; i++) {
      c = 16 * index("0123456789abcdef", substr($i, 1, 1)) + index("0123456789abcdef", substr($i, 2, 1)) - 17
      if (c < 32 || c > 126 || c == 34 || c == 92) printf "\\x%s", $i; else printf "%c", c } }')
echo "FENCE stale token $token for fence key \"$shown\": the highest is ${highest:-unknown}" >&2
exit 3
