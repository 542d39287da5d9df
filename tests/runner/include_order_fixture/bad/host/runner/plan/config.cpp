// fixture: plan/ reaching up to run/ on line 3
#include "runner/plan/config.hpp"
#include "runner/run/run.hpp"
