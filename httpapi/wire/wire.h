// The HTTP protocol of fenced as both ends speak it: routes, header names, error codes and the
// Status each maps to, the JSON of a receipt and of a decision, how names travel in JSON and in
// headers, and strict number parsing. The server (handler.cc), the store client
// (store_client.cc) and fencectl use this and nothing else, so the two ends cannot drift apart.
#pragma once

#include "bodies.h"
#include "errors.h"
#include "fields.h"
#include "routes.h"
