// fixture: analyze/ includes a lower folder, in angle brackets
#include <runner/plan/config.hpp>
#include "analyze.hpp"
