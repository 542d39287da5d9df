// fixture: not an entry header
#include "runner/run/phases.hpp"
