// The timeline's names in the demo's namespace: the demo draws with fencekit::timeline.
#pragma once

#include "fencekit/timeline/timeline.h"

namespace fencekit::demo {

using timeline::Event;
using timeline::Kind;
using timeline::Label;
using timeline::Lanes;
using timeline::LaneTitle;
using timeline::RenderHtml;
using timeline::RenderJson;
using timeline::RenderTerminal;
using timeline::Timeline;

}  // namespace fencekit::demo
