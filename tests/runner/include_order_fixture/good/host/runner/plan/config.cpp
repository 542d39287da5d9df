// fixture: plan/ includes its own folder only
#include "runner/plan/config.hpp"
