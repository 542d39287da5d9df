// fixture: core/ lies below the runner

#include "runner/plan/config.hpp"
