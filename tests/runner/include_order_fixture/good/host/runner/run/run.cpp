// fixture: run/ may include plan/
#include "runner/plan/config.hpp"
#include "runner/run/run.hpp"
