// fixture: a relative include climbing to run/ on line 2
#include "../run/run.hpp"
